package org.sparkccl.core.wait;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.junit.jupiter.api.Test;

class SpinYieldParkTest {
    @Test
    void spinsFirstAndResetStartsOver() {
        SpinYieldPark idle = new SpinYieldPark(3, 0, 1, 1);
        for (int i = 0; i < 3; i++) {
            assertFalse(idle.pastSpinning());
            idle.idle();
        }
        assertTrue(idle.pastSpinning());
        idle.reset();
        assertFalse(idle.pastSpinning());
    }

    @Test
    void yieldsForItsTimeBeforeItParks() {
        // Parks would be 50 ms each: 50 idles within the 1 s yield phase take far less than 2.5 s.
        SpinYieldPark idle = new SpinYieldPark(0, TimeUnit.SECONDS.toNanos(1), TimeUnit.MILLISECONDS.toNanos(50),
                TimeUnit.MILLISECONDS.toNanos(50));
        long start = System.nanoTime();
        for (int i = 0; i < 50; i++) {
            idle.idle();
        }
        long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
        assertTrue(ms < 1000, "50 idles in the yield phase took " + ms + " ms: they parked");
    }

    @Test
    void parksOnceTheYieldTimeIsOver() {
        SpinYieldPark idle = new SpinYieldPark(0, 0, TimeUnit.MILLISECONDS.toNanos(20), TimeUnit.MILLISECONDS.toNanos(20));
        // A park returns at once while the thread holds an unpark permit (an earlier unpark of this test
        // thread, e.g. by the test framework, leaves one): take it first, so the park below is a real one.
        LockSupport.parkNanos(1);
        long start = System.nanoTime();
        idle.idle();
        long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
        assertTrue(ms >= 19, "with no yield time the first idle after the spins parks 20 ms; it took " + ms + " ms");
    }

    @Test
    void refusesNonsense() {
        assertThrows(IllegalArgumentException.class, () -> new SpinYieldPark(-1, 0, 1, 1));
        assertThrows(IllegalArgumentException.class, () -> new SpinYieldPark(0, 0, 0, 1));
        assertThrows(IllegalArgumentException.class, () -> new SpinYieldPark(0, 0, 10, 1));
    }
}
