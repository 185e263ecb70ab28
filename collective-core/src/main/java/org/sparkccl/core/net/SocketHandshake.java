package org.sparkccl.core.net;

import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;
import org.sparkccl.core.wire.WireFormat;
import org.sparkccl.core.wire.WireFormatException;

/**
 * The first bytes on every socket-transport connection, both ways. The connecting rank sends a hello
 * naming the ring ({@code tag}), both ranks, the connection's index and a fresh nonce, with an HMAC
 * over all of it keyed by the communicator's secret (every rank derives the secret from random bytes
 * that each rank put into the one bootstrap round: nobody outside the round knows it). The accepting
 * rank checks it and answers OK with its own HMAC over the nonce (so the connecting rank knows it
 * reached a rank of its communicator), or ERROR with the reason. The hello is a sealed
 * {@link WireFormat} message.
 */
final class SocketHandshake {
    /** Version 2: the hello sealed (body length and CRC32C). */
    static final WireFormat HELLO = WireFormat.sealed("socket-transport hello", 0x53434E54, 2); // "SCNT"
    static final int NONCE_BYTES = 16;
    static final int MAC_BYTES = 32;
    static final int HELLO_BODY_BYTES = 16 + NONCE_BYTES + MAC_BYTES;
    static final byte OK = 0;
    static final byte ERROR = 1;
    private static final int MAX_REASON_BYTES = 1024;

    /** What a connecting rank says about itself. */
    static final class Hello {
        final int tag;
        final int fromRank;
        final int toRank;
        final int index;
        final byte[] nonce;
        final byte[] mac;

        Hello(int tag, int fromRank, int toRank, int index, byte[] nonce, byte[] mac) {
            this.tag = tag;
            this.fromRank = fromRank;
            this.toRank = toRank;
            this.index = index;
            this.nonce = nonce;
            this.mac = mac;
        }

        static Hello signed(byte[] secret, int tag, int fromRank, int toRank, int index, byte[] nonce) {
            return new Hello(tag, fromRank, toRank, index, nonce, clientMac(secret, tag, fromRank, toRank, index, nonce));
        }

        void write(DataOutputStream out) throws IOException {
            ByteBuffer body = ByteBuffer.allocate(HELLO_BODY_BYTES);
            body.putInt(tag).putInt(fromRank).putInt(toRank).putInt(index).put(nonce).put(mac);
            HELLO.write(out, body.array());
            out.flush();
        }

        /** Reads a hello; throws {@link Refused} with the reason for anything that is not a sparkccl hello of this version. */
        static Hello read(DataInputStream in) throws IOException {
            String from = "the connecting side";
            try {
                ByteBuffer b = ByteBuffer.wrap(HELLO.read(in, HELLO_BODY_BYTES, from));
                if (b.remaining() != HELLO_BODY_BYTES) {
                    throw HELLO.malformed(from, "a body of " + b.remaining() + " bytes, expected " + HELLO_BODY_BYTES);
                }
                int tag = b.getInt();
                int fromRank = b.getInt();
                int toRank = b.getInt();
                int index = b.getInt();
                byte[] nonce = new byte[NONCE_BYTES];
                b.get(nonce);
                byte[] mac = new byte[MAC_BYTES];
                b.get(mac);
                return new Hello(tag, fromRank, toRank, index, nonce, mac);
            } catch (WireFormatException e) {
                throw new Refused(e.getMessage());
            }
        }

        boolean signedWith(byte[] secret) {
            return MessageDigest.isEqual(mac, clientMac(secret, tag, fromRank, toRank, index, nonce));
        }

        @Override
        public String toString() {
            return "connection " + index + " of ring " + tag + " from rank " + fromRank + " to rank " + toRank;
        }
    }

    /** A hello that this rank turns away; the message goes back to the connecting side. */
    static final class Refused extends IOException {
        Refused(String reason) {
            super(reason);
        }
    }

    private SocketHandshake() {
    }

    static void writeOk(DataOutputStream out, byte[] secret, byte[] clientNonce) throws IOException {
        out.writeByte(OK);
        out.write(serverMac(secret, clientNonce));
        out.flush();
    }

    static void writeRefusal(DataOutputStream out, String reason) throws IOException {
        byte[] text = reason.getBytes(StandardCharsets.UTF_8);
        int n = Math.min(text.length, MAX_REASON_BYTES);
        out.writeByte(ERROR);
        out.writeInt(n);
        out.write(text, 0, n);
        out.flush();
    }

    /** Reads the accepting rank's answer: null when it accepted and proved the secret, else why not. */
    static String readAnswer(DataInputStream in, byte[] secret, byte[] clientNonce) throws IOException {
        byte status = in.readByte();
        if (status == OK) {
            byte[] mac = new byte[MAC_BYTES];
            in.readFully(mac);
            return MessageDigest.isEqual(mac, serverMac(secret, clientNonce)) ? null
                    : "the listening side does not know this communicator's secret (it is not a rank of this"
                    + " communicator: a stale address, or another job on that port)";
        }
        int n = in.readInt();
        if (n < 0 || n > MAX_REASON_BYTES) {
            return "refused, with an unreadable reason";
        }
        byte[] text = new byte[n];
        in.readFully(text);
        return new String(text, StandardCharsets.UTF_8);
    }

    /** The secret every rank derives alike: SHA-256 over each rank's random bytes, in rank order. */
    static byte[] communicatorSecret(byte[][] randomPerRank) {
        try {
            MessageDigest sha = MessageDigest.getInstance("SHA-256");
            sha.update("sparkccl socket secret".getBytes(StandardCharsets.UTF_8));
            for (byte[] r : randomPerRank) {
                sha.update(r);
            }
            return sha.digest();
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException("SHA-256 is missing from this JRE", e);
        }
    }

    private static byte[] clientMac(byte[] secret, int tag, int from, int to, int index, byte[] nonce) {
        ByteBuffer b = ByteBuffer.allocate(8 + 16 + NONCE_BYTES);
        b.putLong(0x636C69656E742D31L); // "client-1": a client proof is never a valid server proof
        b.putInt(tag).putInt(from).putInt(to).putInt(index).put(nonce);
        return hmac(secret, b.array());
    }

    private static byte[] serverMac(byte[] secret, byte[] clientNonce) {
        ByteBuffer b = ByteBuffer.allocate(8 + NONCE_BYTES);
        b.putLong(0x7365727665722D31L); // "server-1"
        b.put(clientNonce);
        return hmac(secret, b.array());
    }

    private static byte[] hmac(byte[] secret, byte[] data) {
        try {
            Mac mac = Mac.getInstance("HmacSHA256");
            mac.init(new SecretKeySpec(secret, "HmacSHA256"));
            return mac.doFinal(data);
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException("HmacSHA256 is missing from this JRE", e);
        }
    }
}
