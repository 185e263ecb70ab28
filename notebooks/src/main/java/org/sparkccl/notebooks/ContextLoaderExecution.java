package org.sparkccl.notebooks;

import java.lang.reflect.Method;
import java.util.Map;
import jdk.jshell.execution.LocalExecutionControl;
import jdk.jshell.spi.ExecutionControl;
import jdk.jshell.spi.ExecutionControlProvider;
import jdk.jshell.spi.ExecutionEnv;

/**
 * JShell's in-process ("local") execution, with one change: a cell runs with the class loader of
 * the cell's classes as its thread's context class loader.
 *
 * <p>Why: Spark finds classes through the context class loader. A SparkContext created in a cell
 * builds its local executor with that loader as parent, so a lambda written in a cell (a class
 * that only JShell's loader knows) can be deserialized in a task. With JShell's default the
 * context loader is the application loader and every barrier task fails with
 * ClassNotFoundException. In-process execution also means the cells run in the kernel's JVM,
 * with exactly the JVM options the kernelspec gives it.
 */
public final class ContextLoaderExecution implements ExecutionControlProvider {
    @Override
    public String name() {
        return "sparkccl-local";
    }

    @Override
    public ExecutionControl generate(ExecutionEnv env, Map<String, String> parameters) {
        return new LocalExecutionControl() {
            @Override
            protected String invoke(Method doitMethod) throws Exception {
                Thread thread = Thread.currentThread();
                ClassLoader before = thread.getContextClassLoader();
                // LocalExecutionControl runs the cell in a new thread, which inherits this one's loader.
                thread.setContextClassLoader(doitMethod.getDeclaringClass().getClassLoader());
                try {
                    return super.invoke(doitMethod);
                } finally {
                    thread.setContextClassLoader(before);
                }
            }
        };
    }
}
