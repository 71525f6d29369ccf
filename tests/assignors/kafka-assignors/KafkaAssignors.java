/*
 * Runs Apache Kafka's own consumer partition assignors on group scenarios read from stdin, so
 * tests/assignors/test_kafka_interop.py can compare pysparklog's assignors with them.
 *
 * Run as a single-file source program (nothing is compiled to disk):
 *   java -cp <kafka-clients classpath> KafkaAssignors.java < scenarios > results
 *
 * Each assignor runs the way a Java group leader runs it: a new assignor object per scenario and
 * ConsumerPartitionAssignor.assign(Cluster, GroupSubscription). The subscriptions go in a
 * LinkedHashMap (the assignor walks them in the scenario's member order) or in a HashMap filled in
 * that order, as ConsumerCoordinator.onLeaderElected fills one from the JoinGroup response. The
 * sticky assignor reads what a member owned from its user data; that is written with one entry
 * per partition so the assignor sees the scenario's order.
 *
 * Input, one scenario after another, whitespace-separated tokens (names never contain whitespace):
 *   scenario <assignor name> <LinkedHashMap or HashMap>
 *   topic <name> <partition count>                       (the cluster's metadata; count may be 0)
 *   member <member id> <group.instance.id or -> <generation> <topic count> <topic>... <owned count> (<topic> <partition>)...
 *   end
 * Output, per scenario in input order:
 *   result
 *   member <member id> <partition count> (<topic> <partition>)...   (in the order the assignor lists them)
 *   end
 * or a single line "error <exception>" when the assignor throws.
 */

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.StringTokenizer;

import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.GroupSubscription;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Subscription;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.consumer.RoundRobinAssignor;
import org.apache.kafka.clients.consumer.StickyAssignor;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;

public class KafkaAssignors {

    private static final Node BROKER = new Node(0, "localhost", 9092);

    private static final class Member {
        String memberId;
        Optional<String> groupInstanceId;
        int generation;
        List<String> topics = new ArrayList<>();
        List<TopicPartition> owned = new ArrayList<>();
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintWriter out = new PrintWriter(System.out, false, StandardCharsets.UTF_8);
        String assignorName = null;
        boolean hashMap = false;
        Map<String, Integer> topics = new LinkedHashMap<>();
        List<Member> members = new ArrayList<>();
        String line;
        while ((line = in.readLine()) != null) {
            StringTokenizer tokens = new StringTokenizer(line);
            if (!tokens.hasMoreTokens())
                continue;
            switch (tokens.nextToken()) {
                case "scenario":
                    assignorName = tokens.nextToken();
                    hashMap = tokens.nextToken().equals("HashMap");
                    topics.clear();
                    members.clear();
                    break;
                case "topic":
                    topics.put(tokens.nextToken(), Integer.parseInt(tokens.nextToken()));
                    break;
                case "member":
                    members.add(parseMember(tokens));
                    break;
                case "end":
                    out.print(run(assignorName, hashMap, topics, members));
                    out.flush();
                    break;
                default:
                    throw new IllegalArgumentException("unknown line: " + line);
            }
        }
        out.flush();
    }

    private static Member parseMember(StringTokenizer tokens) {
        Member member = new Member();
        member.memberId = tokens.nextToken();
        String instanceId = tokens.nextToken();
        member.groupInstanceId = instanceId.equals("-") ? Optional.empty() : Optional.of(instanceId);
        member.generation = Integer.parseInt(tokens.nextToken());
        int topicCount = Integer.parseInt(tokens.nextToken());
        for (int i = 0; i < topicCount; i++)
            member.topics.add(tokens.nextToken());
        int ownedCount = Integer.parseInt(tokens.nextToken());
        for (int i = 0; i < ownedCount; i++)
            member.owned.add(new TopicPartition(tokens.nextToken(), Integer.parseInt(tokens.nextToken())));
        return member;
    }

    private static ConsumerPartitionAssignor assignor(String name) {
        switch (name) {
            case "range": return new RangeAssignor();
            case "roundrobin": return new RoundRobinAssignor();
            case "sticky": return new StickyAssignor();
            case "cooperative-sticky": return new CooperativeStickyAssignor();
            default: throw new IllegalArgumentException("unknown assignor " + name);
        }
    }

    private static String run(String assignorName, boolean hashMap, Map<String, Integer> topics, List<Member> members) {
        List<PartitionInfo> partitions = new ArrayList<>();
        Node[] replicas = {BROKER};
        topics.forEach((topic, count) -> {
            for (int p = 0; p < count; p++)
                partitions.add(new PartitionInfo(topic, p, BROKER, replicas, replicas));
        });
        Cluster cluster = new Cluster("cluster", List.of(BROKER), partitions, Collections.emptySet(), Collections.emptySet());

        boolean sticky = assignorName.equals("sticky");
        Map<String, Subscription> subscriptions = hashMap ? new HashMap<>() : new LinkedHashMap<>();
        for (Member member : members) {
            ByteBuffer userData = sticky ? stickyUserData(member.owned, member.generation) : null;
            Subscription subscription = new Subscription(
                member.topics, userData, member.owned, member.generation, Optional.empty());
            subscription.setGroupInstanceId(member.groupInstanceId);
            subscriptions.put(member.memberId, subscription);
        }

        Map<String, ConsumerPartitionAssignor.Assignment> assignment;
        try {
            assignment = assignor(assignorName).assign(cluster, new GroupSubscription(subscriptions)).groupAssignment();
        } catch (RuntimeException | AssertionError e) {
            return "error " + e.toString().replaceAll("\\s+", " ") + "\n";
        }
        StringBuilder result = new StringBuilder("result\n");
        for (Member member : members) {
            ConsumerPartitionAssignor.Assignment memberAssignment = assignment.get(member.memberId);
            List<TopicPartition> assigned = memberAssignment == null ? List.of() : memberAssignment.partitions();
            result.append("member ").append(member.memberId).append(' ').append(assigned.size());
            for (TopicPartition tp : assigned)
                result.append(' ').append(tp.topic()).append(' ').append(tp.partition());
            result.append('\n');
        }
        return result.append("end\n").toString();
    }

    /**
     * StickyAssignor's user data, version 1: an array of (topic, partitions) entries and the generation.
     * One entry per owned partition keeps their order; a member with no generation and nothing owned
     * sends none, as a consumer that never had an assignment does.
     */
    private static ByteBuffer stickyUserData(List<TopicPartition> owned, int generation) {
        if (owned.isEmpty() && generation < 0)
            return null;
        int size = 4 + 4;
        for (TopicPartition tp : owned)
            size += 2 + tp.topic().getBytes(StandardCharsets.UTF_8).length + 4 + 4;
        ByteBuffer buffer = ByteBuffer.allocate(size);
        buffer.putInt(owned.size());
        for (TopicPartition tp : owned) {
            byte[] topic = tp.topic().getBytes(StandardCharsets.UTF_8);
            buffer.putShort((short) topic.length);
            buffer.put(topic);
            buffer.putInt(1);
            buffer.putInt(tp.partition());
        }
        buffer.putInt(generation);
        buffer.flip();
        return buffer;
    }
}
