package sluice.bench;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.Serializer;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.StoreBuilder;
import org.apache.kafka.streams.state.Stores;
import org.apache.kafka.streams.state.WindowStore;

/**
 * The Kafka Streams side of Sluice's benchmark: the same workloads as bench/jobs/*.ts, with
 * the same serialization (UTF-8 string keys, JSON values decoded into a tree, like JSON.parse),
 * RocksDB stores, commit interval and guarantee. Configured by environment variables (set by
 * bench/run.ts):
 *
 *   BENCH_WORKLOAD   map-filter | enrich | count | running-sum | window | join
 *   BENCH_BROKERS, BENCH_APP_ID, BENCH_INPUT, BENCH_OUTPUT, BENCH_TABLE (join only)
 *   BENCH_GUARANTEE  exactly_once | at_least_once
 *   BENCH_STATE_DIR, BENCH_COMMIT_INTERVAL_MS (100), BENCH_SESSION_TIMEOUT_MS (10000)
 *   BENCH_KS_CACHE_BYTES  statestore.cache.max.bytes (default 0: no record cache, so every
 *                    update is an output, as in Sluice; the bench sets it per workload)
 *   BENCH_KS_THREADS num.stream.threads (default 1; bench/scaling.ts sets more)
 *
 * Prints "STATE <new state>" lines so the bench can tell when the instance is RUNNING.
 */
public final class BenchApp {
  static final ObjectMapper MAPPER = new ObjectMapper();

  static final class JsonSerde implements Serde<JsonNode> {
    @Override
    public Serializer<JsonNode> serializer() {
      return (topic, v) -> {
        if (v == null) return null;
        try {
          return MAPPER.writeValueAsBytes(v);
        } catch (Exception e) {
          throw new RuntimeException(e);
        }
      };
    }

    @Override
    public Deserializer<JsonNode> deserializer() {
      return (topic, b) -> {
        if (b == null) return null;
        try {
          return MAPPER.readTree(b);
        } catch (Exception e) {
          throw new RuntimeException(e);
        }
      };
    }
  }

  static final class RunningSum implements Processor<String, JsonNode, String, JsonNode> {
    private ProcessorContext<String, JsonNode> ctx;
    private KeyValueStore<String, JsonNode> store;

    @Override
    public void init(ProcessorContext<String, JsonNode> context) {
      ctx = context;
      store = context.getStateStore("sums");
    }

    @Override
    public void process(Record<String, JsonNode> r) {
      JsonNode e = r.value();
      JsonNode prev = store.get(r.key());
      long sum = (prev == null ? 0 : prev.path("sum").asLong()) + e.path("amount").asLong();
      long n = (prev == null ? 0 : prev.path("n").asLong()) + 1;
      ObjectNode acc = MAPPER.createObjectNode();
      acc.put("sum", sum);
      acc.put("n", n);
      store.put(r.key(), acc);
      ObjectNode out = MAPPER.createObjectNode();
      out.put("user", e.path("user").asText());
      out.put("sum", sum);
      out.put("n", n);
      out.put("seq", e.path("seq").asLong());
      // withValue keeps the input's key and timestamp (the latency bench reads the timestamp).
      ctx.forward(r.withValue(out));
    }
  }

  static String env(String name, String def) {
    String v = System.getenv(name);
    if (v == null || v.isEmpty()) {
      if (def == null) throw new IllegalArgumentException("missing environment variable " + name);
      return def;
    }
    return v;
  }

  public static void main(String[] args) throws Exception {
    String workload = env("BENCH_WORKLOAD", null);
    String input = env("BENCH_INPUT", null);
    String output = env("BENCH_OUTPUT", null);
    String guarantee = env("BENCH_GUARANTEE", "exactly_once");

    Properties p = new Properties();
    p.put(StreamsConfig.APPLICATION_ID_CONFIG, env("BENCH_APP_ID", null));
    p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, env("BENCH_BROKERS", null));
    p.put(StreamsConfig.STATE_DIR_CONFIG, env("BENCH_STATE_DIR", null));
    p.put(
        StreamsConfig.PROCESSING_GUARANTEE_CONFIG,
        switch (guarantee) {
          case "exactly_once" -> StreamsConfig.EXACTLY_ONCE_V2;
          case "at_least_once" -> StreamsConfig.AT_LEAST_ONCE;
          default -> throw new IllegalArgumentException("BENCH_GUARANTEE: " + guarantee);
        });
    p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, Integer.parseInt(env("BENCH_COMMIT_INTERVAL_MS", "100")));
    // One stream thread: Sluice's worker is one Node.js thread too (bench/scaling.ts sets more).
    p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, Integer.parseInt(env("BENCH_KS_THREADS", "1")));
    long cacheBytes = Long.parseLong(env("BENCH_KS_CACHE_BYTES", "0"));
    p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, cacheBytes);
    p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
    p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
    p.put(StreamsConfig.consumerPrefix("session.timeout.ms"), Integer.parseInt(env("BENCH_SESSION_TIMEOUT_MS", "10000")));
    p.put(StreamsConfig.consumerPrefix("heartbeat.interval.ms"), 3000);
    p.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");

    Serde<String> str = Serdes.String();
    JsonSerde json = new JsonSerde();
    StreamsBuilder b = new StreamsBuilder();
    KStream<String, JsonNode> in = b.stream(input, Consumed.with(str, json));
    switch (workload) {
      case "map-filter" ->
          // Same as bench/jobs/map-filter.ts: keep clicks and buys, project three fields.
          in.filter((k, v) -> !"view".equals(v.path("kind").asText()))
              .mapValues(
                  v -> {
                    ObjectNode o = MAPPER.createObjectNode();
                    o.put("user", v.path("user").asText());
                    o.put("page", v.path("page").asText());
                    o.put("cents", v.path("amount").asInt() * 100);
                    return (JsonNode) o;
                  })
              .to(output, Produced.with(str, json));
      case "enrich" ->
          // Same as bench/jobs/enrich.ts: every record, parsed, with computed fields, re-serialized.
          in.mapValues(
                  v -> {
                    ObjectNode o = MAPPER.createObjectNode();
                    String kind = v.path("kind").asText();
                    String user = v.path("user").asText();
                    String page = v.path("page").asText();
                    int amount = v.path("amount").asInt();
                    o.put("user", user);
                    o.put("page", page);
                    o.put("kind", kind);
                    o.put("amount", amount);
                    o.put("seq", v.path("seq").asLong());
                    o.put("cents", amount * 100);
                    o.put("pageId", Integer.parseInt(page.substring(3)));
                    o.put("big", amount >= 250);
                    o.put("label", kind + ":" + user);
                    return (JsonNode) o;
                  })
              .to(output, Produced.with(str, json));
      case "running-sum" -> {
        // Same as bench/jobs/running-sum.ts: Processor API, one KeyValueStore on the source key,
        // the running sum and count of the record's user forwarded for every record.
        StoreBuilder<KeyValueStore<String, JsonNode>> sums =
            Stores.keyValueStoreBuilder(Stores.persistentKeyValueStore("sums"), str, json);
        b.addStateStore(cacheBytes > 0 ? sums.withCachingEnabled() : sums.withCachingDisabled());
        in.process(RunningSum::new, "sums").to(output, Produced.with(str, json));
      }
      case "count" ->
          in.groupByKey()
              .count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("counts"))
              .toStream()
              .to(output, Produced.with(str, Serdes.Long()));
      case "window" ->
          in.groupByKey()
              .windowedBy(TimeWindows.ofSizeWithNoGrace(Duration.ofSeconds(10)))
              .count(Materialized.<String, Long, WindowStore<Bytes, byte[]>>as("window-counts"))
              .toStream()
              .map((wk, n) -> new org.apache.kafka.streams.KeyValue<>(wk.key() + "@" + wk.window().start(), n))
              .to(output, Produced.with(str, Serdes.Long()));
      case "join" -> {
        KTable<String, JsonNode> users =
            b.table(
                env("BENCH_TABLE", null),
                Consumed.with(str, json),
                Materialized.<String, JsonNode, KeyValueStore<Bytes, byte[]>>as("users"));
        in.join(
                users,
                (click, user) -> {
                  ObjectNode o = MAPPER.createObjectNode();
                  o.put("user", click.path("user").asText());
                  o.put("page", click.path("page").asText());
                  o.put("tier", user.path("tier").asText());
                  return (JsonNode) o;
                })
            .to(output, Produced.with(str, json));
      }
      default -> throw new IllegalArgumentException("BENCH_WORKLOAD: " + workload);
    }

    KafkaStreams streams = new KafkaStreams(b.build(), p);
    CountDownLatch done = new CountDownLatch(1);
    streams.setStateListener(
        (now, before) -> {
          System.out.println("STATE " + now);
          System.out.flush();
          if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) done.countDown();
        });
    Runtime.getRuntime().addShutdownHook(new Thread(() -> streams.close(Duration.ofSeconds(20))));
    streams.start();
    done.await();
    System.exit(streams.state() == KafkaStreams.State.ERROR ? 1 : 0);
  }
}
