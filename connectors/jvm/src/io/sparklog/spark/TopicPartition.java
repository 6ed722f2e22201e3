package io.sparklog.spark;

import java.io.Serializable;

/** A topic partition, ordered by topic then partition number (the Python connector's order). */
final class TopicPartition implements Comparable<TopicPartition>, Serializable {
  final String topic;
  final int partition;

  TopicPartition(String topic, int partition) { this.topic = topic; this.partition = partition; }

  @Override public int compareTo(TopicPartition o) {
    int c = topic.compareTo(o.topic);
    return c != 0 ? c : Integer.compare(partition, o.partition);
  }

  @Override public boolean equals(Object o) {
    return o instanceof TopicPartition && ((TopicPartition) o).topic.equals(topic) && ((TopicPartition) o).partition == partition;
  }

  @Override public int hashCode() { return topic.hashCode() * 31 + partition; }

  @Override public String toString() { return topic + "-" + partition; }
}
