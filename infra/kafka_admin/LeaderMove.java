// Moves the leadership of every partition of a topic to another in-sync replica, without restarting a broker:
// a reorder-only reassignment makes that replica the preferred one, and a preferred election hands it the lead.
// Run by infra/kafka_admin.py (compiled once against the broker's own kafka-clients jar); prints one line per
// partition moved ("moved P from A to B") and exits 0, or prints "error: ..." and exits 1.
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;

public final class LeaderMove {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        Map<String, Object> config = new HashMap<>();
        config.put("bootstrap.servers", bootstrap);
        config.put("request.timeout.ms", 10000);
        config.put("default.api.timeout.ms", 20000);
        try (Admin admin = Admin.create(config)) {
            TopicDescription described = admin.describeTopics(List.of(topic)).allTopicNames().get(20, TimeUnit.SECONDS)
                    .get(topic);
            Map<TopicPartition, Optional<NewPartitionReassignment>> moves = new HashMap<>();
            Map<TopicPartition, int[]> fromTo = new HashMap<>();
            for (TopicPartitionInfo partition : described.partitions()) {
                if (partition.leader() == null) {
                    continue;
                }
                int leader = partition.leader().id();
                Set<Integer> inSync = new HashSet<>();
                for (Node node : partition.isr()) {
                    inSync.add(node.id());
                }
                List<Integer> replicas = new ArrayList<>();
                for (Node node : partition.replicas()) {
                    replicas.add(node.id());
                }
                // the next in-sync replica after the leader, in replica order, becomes the preferred one
                int at = replicas.indexOf(leader);
                Integer next = null;
                for (int step = 1; step < replicas.size() && next == null; step++) {
                    int candidate = replicas.get((at + step) % replicas.size());
                    if (inSync.contains(candidate)) {
                        next = candidate;
                    }
                }
                if (next == null) {
                    continue; // no other replica in sync: moving the lead would lose acknowledged records
                }
                List<Integer> order = new ArrayList<>(replicas);
                order.remove(next);
                order.add(0, next);
                TopicPartition tp = new TopicPartition(topic, partition.partition());
                moves.put(tp, Optional.of(new NewPartitionReassignment(order)));
                fromTo.put(tp, new int[] {leader, next});
            }
            if (moves.isEmpty()) {
                System.out.println("error: no partition of " + topic + " has another in-sync replica to lead it");
                System.exit(1);
            }
            admin.alterPartitionReassignments(moves).all().get(20, TimeUnit.SECONDS);
            // A reorder of the same replicas completes at once; wait until the controller says so.
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            while (!admin.listPartitionReassignments(moves.keySet()).reassignments().get(20, TimeUnit.SECONDS)
                    .isEmpty()) {
                if (System.nanoTime() > deadline) {
                    System.out.println("error: the reassignment did not complete within 20 s");
                    System.exit(1);
                }
                Thread.sleep(100);
            }
            Map<TopicPartition, Optional<Throwable>> elected = admin.electLeaders(ElectionType.PREFERRED,
                    moves.keySet()).partitions().get(20, TimeUnit.SECONDS);
            for (Map.Entry<TopicPartition, int[]> entry : fromTo.entrySet()) {
                Optional<Throwable> failure = elected.get(entry.getKey());
                if (failure != null && failure.isPresent()) {
                    System.out.println("not moved " + entry.getKey().partition() + ": " + failure.get().getMessage());
                } else {
                    System.out.println("moved " + entry.getKey().partition() + " from " + entry.getValue()[0]
                            + " to " + entry.getValue()[1]);
                }
            }
        } catch (ExecutionException e) {
            System.out.println("error: " + e.getCause());
            System.exit(1);
        }
    }
}
