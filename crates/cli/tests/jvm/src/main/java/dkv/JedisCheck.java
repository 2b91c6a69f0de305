package dkv;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import redis.clients.jedis.DefaultJedisClientConfig;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.JedisPool;
import redis.clients.jedis.JedisPoolConfig;
import redis.clients.jedis.Pipeline;
import redis.clients.jedis.RedisProtocol;
import redis.clients.jedis.Response;
import redis.clients.jedis.Transaction;
import redis.clients.jedis.params.GetExParams;
import redis.clients.jedis.params.SetParams;

/**
 * A real Jedis workload against a Redis-protocol server, run by crates/cli/tests/it/clients_jvm.rs
 * first against redis-server (to prove the checks) and then against `directkv serve`.
 *
 * <p>Usage: {@code java -jar jedis-check.jar HOST PORT PART...} where each PART is one of
 *
 * <ul>
 *   <li>{@code plain}: SET/GET/DEL/INCR/MSET/MGET (over RESP2, and over RESP3 after HELLO 3), a
 *       pipeline of 1000 commands, and a JedisPool of 8 threads doing a mixed read/write
 *       workload with exact checks;
 *   <li>{@code expiry}: SET EX/PX, EXPIRE/TTL/PTTL/PERSIST, SETEX, GETEX, EXISTS after a
 *       PEXPIREAT in the past, and the pipeline and pool workloads with expiring keys;
 *   <li>{@code multi}: MULTI/EXEC through {@code jedis.multi()}, DISCARD, a transaction that
 *       sets an expiring key, and WATCH (EXEC answers nil after another client's write).
 * </ul>
 *
 * <p>Every mismatch ends the program with exit status 1 and a message naming what was expected
 * and what came back; "jedis ok" and exit status 0 mean every check passed. Keys are prefixed
 * {@code jvm:} and the program does not flush the server. Time is only read from the server's
 * TTL replies, and expiry windows are wide (tens of seconds), so a slow machine cannot fail it.
 */
public final class JedisCheck {
    /** Threads of the pool workload. */
    private static final int POOL_THREADS = 8;
    /** Rounds each pool thread runs (each round is several commands). */
    private static final int POOL_ROUNDS = 500;
    /** Commands in the pipeline. */
    private static final int PIPELINE_COMMANDS = 1000;
    /** Seconds the pool and pipeline workloads wait for their threads, a bound against hangs. */
    private static final int WAIT_SECONDS = 60;

    private JedisCheck() {}

    public static void main(String[] args) throws Exception {
        if (args.length < 3) {
            System.err.println("usage: jedis-check HOST PORT plain|expiry|multi...");
            System.exit(2);
        }
        String host = args[0];
        int port = Integer.parseInt(args[1]);
        try (Jedis jedis = new Jedis(host, port)) {
            for (int i = 2; i < args.length; i++) {
                switch (args[i]) {
                    case "plain" -> {
                        plain(jedis);
                        resp3(host, port);
                        pipeline(jedis, false);
                        pool(host, port, false);
                    }
                    case "expiry" -> {
                        expiry(jedis);
                        pipeline(jedis, true);
                        pool(host, port, true);
                    }
                    case "multi" -> multi(jedis, host, port);
                    default -> fail("unknown part " + args[i]);
                }
                System.out.println("jedis " + args[i] + " ok");
            }
        } catch (Mismatch e) {
            System.err.println("MISMATCH: " + e.getMessage());
            System.exit(1);
        }
        System.out.println("jedis ok");
    }

    /** A check that failed; main prints it and exits 1. */
    private static final class Mismatch extends RuntimeException {
        Mismatch(String message) {
            super(message);
        }
    }

    private static void fail(String message) {
        throw new Mismatch(message);
    }

    private static void eq(String what, Object expected, Object actual) {
        if (expected == null ? actual != null : !expected.equals(actual)) {
            fail(what + ": expected " + expected + ", got " + actual);
        }
    }

    private static void within(String what, long low, long high, long actual) {
        if (actual < low || actual > high) {
            fail(what + ": expected " + low + ".." + high + ", got " + actual);
        }
    }

    private static void plain(Jedis j) {
        j.del("jvm:k", "jvm:n", "jvm:a", "jvm:b", "jvm:c");
        eq("PING", "PONG", j.ping());
        eq("SET", "OK", j.set("jvm:k", "hello"));
        eq("GET", "hello", j.get("jvm:k"));
        eq("GET missing", null, j.get("jvm:missing"));
        eq("SET NX on an existing key", null, j.set("jvm:k", "x", SetParams.setParams().nx()));
        eq("INCR", 1L, j.incr("jvm:n"));
        eq("INCRBY", 11L, j.incrBy("jvm:n", 10));
        eq("DECR", 10L, j.decr("jvm:n"));
        eq("MSET", "OK", j.mset("jvm:a", "1", "jvm:b", "2", "jvm:c", "3"));
        eq("MGET", List.of("1", "2", "3"), j.mget("jvm:a", "jvm:b", "jvm:c"));
        List<String> withHole = j.mget("jvm:a", "jvm:missing", "jvm:c");
        eq("MGET with a missing key", java.util.Arrays.asList("1", null, "3"), withHole);
        eq("EXISTS", 3L, j.exists("jvm:a", "jvm:b", "jvm:c"));
        eq("DEL", 2L, j.del("jvm:a", "jvm:b", "jvm:missing"));
        eq("EXISTS after DEL", false, j.exists("jvm:a"));
        eq("APPEND", 7L, j.append("jvm:k", "!!"));
        eq("STRLEN", 7L, j.strlen("jvm:k"));
        try {
            j.incr("jvm:k");
            fail("INCR of a non-integer succeeded");
        } catch (redis.clients.jedis.exceptions.JedisDataException e) {
            eq("INCR error", "ERR value is not an integer or out of range", e.getMessage());
        }
        // The connection is still usable after the error.
        eq("GET after an error", "hello!!", j.get("jvm:k"));
    }

    /** A RESP3 connection (Jedis sends HELLO 3 on connect): the same replies, as Java types. */
    private static void resp3(String host, int port) {
        DefaultJedisClientConfig config =
                DefaultJedisClientConfig.builder().protocol(RedisProtocol.RESP3).build();
        try (Jedis j = new Jedis(new HostAndPort(host, port), config)) {
            j.del("jvm:r3:k", "jvm:r3:n");
            eq("RESP3 SET", "OK", j.set("jvm:r3:k", "v3"));
            eq("RESP3 GET", "v3", j.get("jvm:r3:k"));
            eq("RESP3 GET missing", null, j.get("jvm:r3:missing"));
            eq("RESP3 INCR", 1L, j.incr("jvm:r3:n"));
            eq("RESP3 MGET", java.util.Arrays.asList("v3", null, "1"),
                    j.mget("jvm:r3:k", "jvm:r3:missing", "jvm:r3:n"));
            eq("RESP3 EXISTS", true, j.exists("jvm:r3:k"));
            eq("RESP3 DEL", 2L, j.del("jvm:r3:k", "jvm:r3:n"));
        }
    }

    private static void expiry(Jedis j) {
        j.del("jvm:ex", "jvm:px", "jvm:e", "jvm:sx", "jvm:gx", "jvm:past", "jvm:plain");
        eq("SET EX", "OK", j.set("jvm:ex", "v", SetParams.setParams().ex(100)));
        within("TTL after SET EX 100", 1, 100, j.ttl("jvm:ex"));
        eq("SET PX", "OK", j.set("jvm:px", "v", SetParams.setParams().px(50_000)));
        within("PTTL after SET PX 50000", 1, 50_000, j.pttl("jvm:px"));
        eq("GET of an expiring key", "v", j.get("jvm:px"));

        eq("TTL of a missing key", -2L, j.ttl("jvm:e"));
        eq("SET", "OK", j.set("jvm:e", "v"));
        eq("TTL without expiry", -1L, j.ttl("jvm:e"));
        eq("EXPIRE", 1L, j.expire("jvm:e", 200));
        within("TTL after EXPIRE 200", 1, 200, j.ttl("jvm:e"));
        within("PTTL after EXPIRE 200", 1, 200_000, j.pttl("jvm:e"));
        eq("EXPIRE of a missing key", 0L, j.expire("jvm:missing", 10));
        eq("PERSIST", 1L, j.persist("jvm:e"));
        eq("TTL after PERSIST", -1L, j.ttl("jvm:e"));
        eq("PERSIST without expiry", 0L, j.persist("jvm:e"));

        eq("SETEX", "OK", j.setex("jvm:sx", 30, "sv"));
        eq("GET after SETEX", "sv", j.get("jvm:sx"));
        within("TTL after SETEX 30", 1, 30, j.ttl("jvm:sx"));
        // A plain SET drops the expiry (Redis semantics).
        eq("SET over an expiring key", "OK", j.set("jvm:sx", "plain"));
        eq("TTL after a plain SET", -1L, j.ttl("jvm:sx"));

        eq("SET", "OK", j.set("jvm:gx", "g"));
        eq("GETEX EX", "g", j.getEx("jvm:gx", GetExParams.getExParams().ex(40)));
        within("TTL after GETEX EX 40", 1, 40, j.ttl("jvm:gx"));
        eq("GETEX PERSIST", "g", j.getEx("jvm:gx", GetExParams.getExParams().persist()));
        eq("TTL after GETEX PERSIST", -1L, j.ttl("jvm:gx"));
        eq("GETEX of a missing key", null, j.getEx("jvm:missing", GetExParams.getExParams().ex(5)));

        eq("SET", "OK", j.set("jvm:past", "p"));
        eq("PEXPIREAT in the past", 1L, j.pexpireAt("jvm:past", 1000L));
        eq("EXISTS after PEXPIREAT in the past", 0L, j.exists("jvm:past", "jvm:missing"));
        eq("GET after PEXPIREAT in the past", null, j.get("jvm:past"));
        eq("TTL after PEXPIREAT in the past", -2L, j.ttl("jvm:past"));
    }

    private static void pipeline(Jedis j, boolean withExpiry) {
        String prefix = withExpiry ? "jvm:pe:" : "jvm:p:";
        j.del(prefix + "n");
        Pipeline p = j.pipelined();
        List<Response<String>> sets = new ArrayList<>();
        List<Response<String>> gets = new ArrayList<>();
        List<Response<Long>> incrs = new ArrayList<>();
        List<Response<Long>> ttls = new ArrayList<>();
        List<Response<Long>> lens = new ArrayList<>();
        // 250 rounds of 4 commands: 1000 commands sent before any reply is read.
        for (int i = 0; i < PIPELINE_COMMANDS / 4; i++) {
            String key = prefix + i;
            if (withExpiry) {
                sets.add(p.set(key, "v" + i, SetParams.setParams().ex(100)));
                ttls.add(p.ttl(key));
            } else {
                sets.add(p.set(key, "v" + i));
                lens.add(p.strlen(key));
            }
            gets.add(p.get(key));
            incrs.add(p.incr(prefix + "n"));
        }
        p.sync();
        for (int i = 0; i < sets.size(); i++) {
            eq("pipelined SET " + i, "OK", sets.get(i).get());
            eq("pipelined GET " + i, "v" + i, gets.get(i).get());
            eq("pipelined INCR " + i, (long) i + 1, incrs.get(i).get());
            if (withExpiry) {
                within("pipelined TTL " + i, 1, 100, ttls.get(i).get());
            } else {
                eq("pipelined STRLEN " + i, (long) ("v" + i).length(), lens.get(i).get());
            }
        }
    }

    private static void multi(Jedis j, String host, int port) {
        j.del("jvm:t:a", "jvm:t:n");
        Transaction t = j.multi();
        Response<String> set = t.set("jvm:t:a", "1");
        Response<Long> incr = t.incr("jvm:t:n");
        Response<Long> incrBy = t.incrBy("jvm:t:n", 5);
        Response<String> get = t.get("jvm:t:a");
        List<Object> replies = t.exec();
        eq("EXEC reply count", 4, replies.size());
        eq("SET in MULTI", "OK", set.get());
        eq("INCR in MULTI", 1L, incr.get());
        eq("INCRBY in MULTI", 6L, incrBy.get());
        eq("GET in MULTI", "1", get.get());
        eq("GET after EXEC", "6", j.get("jvm:t:n"));

        // DISCARD drops the queued commands.
        Transaction d = j.multi();
        d.set("jvm:t:a", "discarded");
        eq("DISCARD", "OK", d.discard());
        eq("GET after DISCARD", "1", j.get("jvm:t:a"));

        // A transaction that sets an expiring key.
        Transaction e = j.multi();
        e.set("jvm:t:e", "v", SetParams.setParams().ex(100));
        Response<Long> ttl = e.ttl("jvm:t:e");
        e.exec();
        within("TTL in MULTI", 1, 100, ttl.get());

        // WATCH: a watched key that another client changes makes EXEC answer nil.
        try (Jedis other = new Jedis(host, port)) {
            eq("WATCH", "OK", j.watch("jvm:t:a"));
            eq("SET by another client", "OK", other.set("jvm:t:a", "changed"));
            Transaction w = j.multi();
            w.set("jvm:t:a", "lost");
            eq("EXEC after a watched key changed", null, w.exec());
            eq("watched key after the aborted EXEC", "changed", j.get("jvm:t:a"));
        }
        // WATCH of an untouched key lets EXEC run.
        eq("WATCH", "OK", j.watch("jvm:t:a"));
        Transaction ok = j.multi();
        ok.set("jvm:t:a", "won");
        eq("EXEC after an untouched WATCH", 1, ok.exec().size());
        eq("key after EXEC", "won", j.get("jvm:t:a"));
    }

    /**
     * 8 threads on a JedisPool: each round INCRs a shared counter, INCRBYs its own counter, SETs
     * its own key and reads it back, and reads a key another thread wrote (whatever round it is
     * at, the value must have that thread's form). The counters are exact at the end.
     */
    private static void pool(String host, int port, boolean withExpiry) throws Exception {
        String prefix = withExpiry ? "jvm:poolx:" : "jvm:pool:";
        JedisPoolConfig config = new JedisPoolConfig();
        config.setMaxTotal(POOL_THREADS);
        try (JedisPool pool = new JedisPool(config, host, port)) {
            try (Jedis j = pool.getResource()) {
                j.del(prefix + "shared");
                for (int t = 0; t < POOL_THREADS; t++) {
                    j.del(prefix + "own:" + t, prefix + "key:" + t);
                }
            }
            ExecutorService threads = Executors.newFixedThreadPool(POOL_THREADS);
            List<Future<?>> done = new ArrayList<>();
            for (int t = 0; t < POOL_THREADS; t++) {
                final int me = t;
                done.add(threads.submit(() -> poolThread(pool, prefix, me, withExpiry)));
            }
            threads.shutdown();
            if (!threads.awaitTermination(WAIT_SECONDS, TimeUnit.SECONDS)) {
                fail("pool threads did not finish in " + WAIT_SECONDS + " s");
            }
            for (Future<?> f : done) {
                try {
                    f.get();
                } catch (java.util.concurrent.ExecutionException e) {
                    if (e.getCause() instanceof Mismatch m) {
                        throw m;
                    }
                    throw e;
                }
            }
            try (Jedis j = pool.getResource()) {
                eq("shared counter", String.valueOf(POOL_THREADS * POOL_ROUNDS), j.get(prefix + "shared"));
                for (int t = 0; t < POOL_THREADS; t++) {
                    eq("own counter " + t, String.valueOf(3L * POOL_ROUNDS), j.get(prefix + "own:" + t));
                    eq("last value " + t, "t" + t + ":" + (POOL_ROUNDS - 1), j.get(prefix + "key:" + t));
                    if (withExpiry) {
                        within("TTL of key " + t, 1, 100, j.ttl(prefix + "key:" + t));
                    }
                }
            }
        }
    }

    private static void poolThread(JedisPool pool, String prefix, int me, boolean withExpiry) {
        String myKey = prefix + "key:" + me;
        String otherKey = prefix + "key:" + ((me + 1) % POOL_THREADS);
        String otherForm = "t" + ((me + 1) % POOL_THREADS) + ":";
        for (int round = 0; round < POOL_ROUNDS; round++) {
            try (Jedis j = pool.getResource()) {
                long shared = j.incr(prefix + "shared");
                within("shared counter while running", 1, (long) POOL_THREADS * POOL_ROUNDS, shared);
                eq("own counter", 3L * (round + 1), j.incrBy(prefix + "own:" + me, 3));
                String value = "t" + me + ":" + round;
                if (withExpiry) {
                    eq("SET EX", "OK", j.set(myKey, value, SetParams.setParams().ex(100)));
                } else {
                    eq("SET", "OK", j.set(myKey, value));
                }
                eq("read back", value, j.get(myKey));
                String other = j.get(otherKey);
                if (other != null && !other.startsWith(otherForm)) {
                    fail("read of another thread's key: " + other);
                }
            }
        }
    }
}
