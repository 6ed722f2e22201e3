package io.sparklog.spark;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/** The little JSON the connector needs: offsets {@code {"topic": {"0": 23}}} written exactly as
 *  the Python connector's checkpoint (Python's json.dumps of connectors.offsets.to_json:
 *  sorted topics, partitions in numeric order, ", " and ": " separators, ASCII escapes), and a
 *  small parser for offsets and {@code assign} values. */
final class Json {
  private final String text;
  private int at;

  private Json(String text) { this.text = text; }

  static Object parse(String text) {
    Json j = new Json(text);
    j.ws();
    Object v = j.value();
    j.ws();
    if (j.at != text.length()) throw new IllegalArgumentException("trailing characters at " + j.at);
    return v;
  }

  private void ws() { while (at < text.length() && Character.isWhitespace(text.charAt(at))) at++; }

  private Object value() {
    if (at >= text.length()) throw new IllegalArgumentException("unexpected end");
    char c = text.charAt(at);
    if (c == '{') {
      at++;
      Map<String, Object> m = new LinkedHashMap<>();
      ws();
      if (text.charAt(at) == '}') { at++; return m; }
      while (true) {
        ws();
        String k = string();
        ws();
        expect(':');
        ws();
        m.put(k, value());
        ws();
        if (text.charAt(at) == ',') { at++; continue; }
        expect('}');
        return m;
      }
    }
    if (c == '[') {
      at++;
      List<Object> l = new ArrayList<>();
      ws();
      if (text.charAt(at) == ']') { at++; return l; }
      while (true) {
        ws();
        l.add(value());
        ws();
        if (text.charAt(at) == ',') { at++; continue; }
        expect(']');
        return l;
      }
    }
    if (c == '"') return string();
    int start = at;
    while (at < text.length() && "+-0123456789.eE".indexOf(text.charAt(at)) >= 0) at++;
    String num = text.substring(start, at);
    if (num.isEmpty()) {
      for (String word : new String[] {"true", "false", "null"}) {
        if (text.startsWith(word, at)) { at += word.length(); return word.equals("null") ? null : Boolean.valueOf(word); }
      }
      throw new IllegalArgumentException("unexpected character at " + at);
    }
    if (num.contains(".") || num.contains("e") || num.contains("E")) return Double.valueOf(num);
    return Long.valueOf(num);
  }

  private void expect(char c) {
    if (at >= text.length() || text.charAt(at) != c) throw new IllegalArgumentException("expected '" + c + "' at " + at);
    at++;
  }

  private String string() {
    expect('"');
    StringBuilder sb = new StringBuilder();
    while (true) {
      char c = text.charAt(at++);
      if (c == '"') return sb.toString();
      if (c == '\\') {
        char e = text.charAt(at++);
        switch (e) {
          case 'n': sb.append('\n'); break;
          case 't': sb.append('\t'); break;
          case 'r': sb.append('\r'); break;
          case 'b': sb.append('\b'); break;
          case 'f': sb.append('\f'); break;
          case 'u': sb.append((char) Integer.parseInt(text.substring(at, at + 4), 16)); at += 4; break;
          default: sb.append(e);
        }
      } else {
        sb.append(c);
      }
    }
  }

  static String quote(String s) {
    StringBuilder sb = new StringBuilder("\"");
    for (char c : s.toCharArray()) {
      if (c == '"' || c == '\\') sb.append('\\').append(c);
      else if (c == '\n') sb.append("\\n");
      else if (c == '\r') sb.append("\\r");
      else if (c == '\t') sb.append("\\t");
      else if (c < 0x20 || c > 0x7e) sb.append(String.format("\\u%04x", (int) c));
      else sb.append(c);
    }
    return sb.append('"').toString();
  }

  /** Offsets as the Python connector checkpoints them. */
  static String offsets(Map<TopicPartition, Long> offsets) {
    TreeMap<TopicPartition, Long> sorted = new TreeMap<>(offsets);
    StringBuilder sb = new StringBuilder("{");
    String topic = null;
    for (Map.Entry<TopicPartition, Long> e : sorted.entrySet()) {
      TopicPartition tp = e.getKey();
      if (!tp.topic.equals(topic)) {
        if (topic != null) sb.append("}, ");
        sb.append(quote(tp.topic)).append(": {");
        topic = tp.topic;
      } else {
        sb.append(", ");
      }
      sb.append('"').append(tp.partition).append("\": ").append(e.getValue());
    }
    if (topic != null) sb.append('}');
    return sb.append('}').toString();
  }

  /** Parse {@code {"topic": {"0": 23}}}; IllegalArgumentException describes what is wrong. */
  @SuppressWarnings("unchecked")
  static TreeMap<TopicPartition, Long> parseOffsets(String text) {
    Object v = parse(text);
    if (!(v instanceof Map)) throw new IllegalArgumentException("offsets must be a JSON object of topics");
    TreeMap<TopicPartition, Long> out = new TreeMap<>();
    for (Map.Entry<String, Object> t : ((Map<String, Object>) v).entrySet()) {
      if (!(t.getValue() instanceof Map)) throw new IllegalArgumentException("offsets of topic '" + t.getKey() + "' must be a JSON object");
      for (Map.Entry<String, Object> p : ((Map<String, Object>) t.getValue()).entrySet()) {
        int partition;
        try {
          partition = Integer.parseInt(p.getKey());
        } catch (NumberFormatException e) {
          throw new IllegalArgumentException("partition '" + p.getKey() + "' of topic '" + t.getKey() + "' is not an integer");
        }
        if (!(p.getValue() instanceof Long)) throw new IllegalArgumentException("offset of " + t.getKey() + "-" + p.getKey() + " must be an integer");
        out.put(new TopicPartition(t.getKey(), partition), (Long) p.getValue());
      }
    }
    return out;
  }
}
