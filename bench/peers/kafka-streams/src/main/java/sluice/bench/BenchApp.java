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
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.WindowStore;

/**
 * The Kafka Streams side of Sluice's benchmark: the same four workloads as bench/jobs/*.ts, with
 * the same serialization (UTF-8 string keys, JSON values decoded into a tree, like JSON.parse),
 * RocksDB stores, commit interval and guarantee. Configured by environment variables (set by
 * bench/run.ts):
 *
 *   BENCH_WORKLOAD   map-filter | count | window | join
 *   BENCH_BROKERS, BENCH_APP_ID, BENCH_INPUT, BENCH_OUTPUT, BENCH_TABLE (join only)
 *   BENCH_GUARANTEE  exactly_once | at_least_once
 *   BENCH_STATE_DIR, BENCH_COMMIT_INTERVAL_MS (100), BENCH_SESSION_TIMEOUT_MS (10000)
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
    // One stream thread: Sluice's worker is one Node.js thread too.
    p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
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
