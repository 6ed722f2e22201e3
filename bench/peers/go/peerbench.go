// peerbench: the load generator for spark-log's peer benchmarks (bench/peers, issue 19).
//
// Built by bench/peers/build.py with Debian's golang and its packaged clients
// (golang-github-nats-io-go-nats-dev, golang-github-gomodule-redigo-dev) in GOPATH mode:
// no module download.  Each mode prints one JSON object on stdout.
//
//	peerbench nats-pub   -url U -streams N -replicas R -size B -window W -seconds S
//	peerbench nats-sub   -url U -streams N -count C
//	peerbench nats-lat   -url U -size B -rate R -seconds S
//	peerbench redis-pub  -addr A -streams N -size B -window W -seconds S
//	peerbench redis-sub  -addr A -streams N -count C -batch K
//	peerbench redis-lat  -addr A -size B -rate R -seconds S
//
// Values are distinct windows of one random buffer (incompressible), as spark-log's benches
// send.  Publishers count acknowledged records only; the count is checked against the
// server's own count of the stream afterwards (a mismatch exits 1).
package main

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/nats-io/nats.go"
)

type result struct {
	Mode       string    `json:"mode"`
	Records    int64     `json:"records"`
	Seconds    float64   `json:"seconds"`
	Rate       float64   `json:"rate"`
	Size       int       `json:"size"`
	Window     int       `json:"window,omitempty"`
	Streams    int       `json:"streams"`
	Replicas   int       `json:"replicas,omitempty"`
	P50Ms      float64   `json:"p50_ms,omitempty"`
	P99Ms      float64   `json:"p99_ms,omitempty"`
	LatencyMs  []float64 `json:"latency_ms,omitempty"` // sorted, at most 2,000 points (quantiles)
	StoredBack int64     `json:"stored,omitempty"`
	Client     string    `json:"client"`
}

func die(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "peerbench: "+format+"\n", args...)
	os.Exit(1)
}

func randomBuffer(n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		die("random: %v", err)
	}
	return b
}

// value i of `size` bytes: a window of a random buffer of 65,536 + size bytes.
func valueAt(buf []byte, i int64, size int) []byte {
	off := int(i*7919) % (len(buf) - size)
	return buf[off : off+size]
}

func emit(r result) {
	r.Client = "go"
	out, _ := json.Marshal(r)
	fmt.Println(string(out))
}

func quantiles(lat []float64) (float64, float64, []float64) {
	if len(lat) == 0 {
		return 0, 0, nil
	}
	sort.Float64s(lat)
	pick := func(q float64) float64 { return lat[int(q*float64(len(lat)-1))] }
	points := lat
	if len(lat) > 2000 {
		points = make([]float64, 2000)
		for i := range points {
			points[i] = pick(float64(i) / 1999)
		}
	}
	return pick(0.5), pick(0.99), points
}

func streamName(i int) string { return "bench" + strconv.Itoa(i) }

// ---- NATS JetStream ----

func natsConnect(url string) (*nats.Conn, nats.JetStreamContext) {
	nc, err := nats.Connect(url, nats.Timeout(10*time.Second))
	if err != nil {
		die("connect %s: %v", url, err)
	}
	js, err := nc.JetStream(nats.PublishAsyncMaxPending(1 << 20))
	if err != nil {
		die("jetstream: %v", err)
	}
	return nc, js
}

// the stream is created afresh; in a cluster the meta leader may not be elected yet: retry.
func natsStream(js nats.JetStreamContext, name string, replicas int) {
	deadline := time.Now().Add(30 * time.Second)
	_ = js.DeleteStream(name)
	for {
		_, err := js.AddStream(&nats.StreamConfig{Name: name, Subjects: []string{name}, Storage: nats.FileStorage,
			Replicas: replicas})
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			die("add stream %s R%d: %v", name, replicas, err)
		}
		time.Sleep(200 * time.Millisecond) // retry pacing while the cluster elects its meta leader
	}
}

func natsPub(url string, streams, replicas, size, window int, seconds float64) {
	var wg sync.WaitGroup
	var acked, failed int64
	buf := randomBuffer(65536 + size)
	for s := 0; s < streams; s++ {
		_, js := natsConnect(url)
		natsStream(js, streamName(s), replicas)
	}
	start := time.Now()
	for s := 0; s < streams; s++ {
		wg.Add(1)
		go func(s int) {
			defer wg.Done()
			nc, err := nats.Connect(url)
			if err != nil {
				die("connect: %v", err)
			}
			defer nc.Close()
			// flow control: PublishAsync stalls while `window` acks are outstanding; failures
			// arrive at the error handler; the stored count is checked after all is acknowledged
			js, err := nc.JetStream(nats.PublishAsyncMaxPending(window),
				nats.PublishAsyncErrHandler(func(_ nats.JetStream, _ *nats.Msg, _ error) { atomic.AddInt64(&failed, 1) }))
			if err != nil {
				die("jetstream: %v", err)
			}
			subject := streamName(s)
			var i int64
			for time.Since(start).Seconds() < seconds {
				for k := 0; k < 256; k++ {
					// the client gives up waiting for a free slot after 200 ms (R3 on a busy machine):
					// the same record again, as backpressure
					_, err := js.PublishAsync(subject, valueAt(buf, i, size))
					for err != nil && strings.Contains(err.Error(), "stalled with too many outstanding") {
						_, err = js.PublishAsync(subject, valueAt(buf, i, size))
					}
					if err != nil {
						die("publish: %v", err)
					}
					i++
				}
			}
			select {
			case <-js.PublishAsyncComplete():
			case <-time.After(60 * time.Second):
				die("publish: %d acknowledgements outstanding after 60 s", js.PublishAsyncPending())
			}
			atomic.AddInt64(&acked, i)
		}(s)
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	// the stored count, as the servers report it
	_, js := natsConnect(url)
	var stored int64
	for s := 0; s < streams; s++ {
		info, err := js.StreamInfo(streamName(s))
		if err != nil {
			die("stream info: %v", err)
		}
		stored += int64(info.State.Msgs)
	}
	acked -= failed
	if failed > 0 || stored != acked {
		die("count check: %d acknowledged, %d failed, %d stored", acked, failed, stored)
	}
	emit(result{Mode: "nats-pub", Records: acked, Seconds: elapsed, Rate: float64(acked) / elapsed, Size: size,
		Window: window, Streams: streams, Replicas: replicas, StoredBack: stored})
}

func natsSub(url string, streams int, count int64) {
	var wg sync.WaitGroup
	var got, nbytes int64
	start := time.Now()
	for s := 0; s < streams; s++ {
		_, js := natsConnect(url)
		info, err := js.StreamInfo(streamName(s))
		if err != nil {
			die("stream info: %v", err)
		}
		want := int64(info.State.Msgs)
		if count > 0 && count/int64(streams) < want {
			want = count / int64(streams)
		}
		wg.Add(1)
		go func(s int, want int64) {
			defer wg.Done()
			done := make(chan struct{})
			var n int64
			sub, err := js.Subscribe(streamName(s), func(m *nats.Msg) {
				atomic.AddInt64(&nbytes, int64(len(m.Data)))
				n++
				if n == want {
					close(done)
				}
			}, nats.OrderedConsumer(), nats.DeliverAll())
			if err != nil {
				die("subscribe: %v", err)
			}
			_ = sub.SetPendingLimits(-1, -1)
			select {
			case <-done:
			case <-time.After(120 * time.Second):
				die("consume: %d of %d after 120 s", n, want)
			}
			_ = sub.Unsubscribe()
			atomic.AddInt64(&got, n)
		}(s, want)
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	emit(result{Mode: "nats-sub", Records: got, Seconds: elapsed, Rate: float64(got) / elapsed,
		Size: int(nbytes / max64(got, 1)), Streams: streams})
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// produce-to-consume latency: each value carries its send time (ns) in its first 8 bytes.
func natsLat(url string, size, rate int, seconds float64) {
	_, js := natsConnect(url)
	natsStream(js, "lat", 1)
	var mu sync.Mutex
	var lat []float64
	var received int64
	sub, err := js.Subscribe("lat", func(m *nats.Msg) {
		now := time.Now().UnixNano()
		sent := int64(binary.LittleEndian.Uint64(m.Data[:8]))
		mu.Lock()
		lat = append(lat, float64(now-sent)/1e6)
		mu.Unlock()
		atomic.AddInt64(&received, 1)
	}, nats.OrderedConsumer(), nats.DeliverNew())
	if err != nil {
		die("subscribe: %v", err)
	}
	defer sub.Unsubscribe()
	pubConn, pjs := natsConnect(url)
	defer pubConn.Close()
	buf := randomBuffer(65536 + size)
	sent := pace(rate, seconds, func(i int64) {
		v := append([]byte(nil), valueAt(buf, i, size)...)
		binary.LittleEndian.PutUint64(v[:8], uint64(time.Now().UnixNano()))
		if _, err := pjs.PublishAsync("lat", v); err != nil {
			die("publish: %v", err)
		}
	})
	waitFor(func() bool { return atomic.LoadInt64(&received) >= sent }, 10*time.Second)
	mu.Lock()
	defer mu.Unlock()
	p50, p99, points := quantiles(lat)
	emit(result{Mode: "nats-lat", Records: int64(len(lat)), Seconds: seconds, Rate: float64(rate), Size: size,
		Streams: 1, P50Ms: p50, P99Ms: p99, LatencyMs: points})
}

// pace calls send(i) `rate` times a second for `seconds`; returns the number sent.
func pace(rate int, seconds float64, send func(int64)) int64 {
	start := time.Now()
	var i int64
	for time.Since(start).Seconds() < seconds {
		due := start.Add(time.Duration(float64(i) / float64(rate) * 1e9))
		if d := time.Until(due); d > 0 {
			time.Sleep(d) // pacing the load generator
		}
		send(i)
		i++
	}
	return i
}

func waitFor(cond func() bool, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for !cond() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
}

// ---- Redis Streams ----

func redisDial(addr string) redis.Conn {
	c, err := redis.Dial("tcp", addr)
	if err != nil {
		die("redis dial %s: %v", addr, err)
	}
	return c
}

func redisPub(addr string, streams, size, window int, seconds float64) {
	var wg sync.WaitGroup
	var acked int64
	buf := randomBuffer(65536 + size)
	c := redisDial(addr)
	for s := 0; s < streams; s++ {
		if _, err := c.Do("DEL", streamName(s)); err != nil {
			die("del: %v", err)
		}
	}
	start := time.Now()
	for s := 0; s < streams; s++ {
		wg.Add(1)
		go func(s int) {
			defer wg.Done()
			conn := redisDial(addr)
			defer conn.Close()
			key := streamName(s)
			slots := make(chan struct{}, window) // replies outstanding: at most `window` in flight
			var sentTotal int64
			stop := make(chan struct{})
			readerDone := make(chan struct{})
			go func() {
				defer close(readerDone)
				var n int64
				for {
					select {
					case <-stop:
						if n == atomic.LoadInt64(&sentTotal) {
							return
						}
					default:
					}
					if n == atomic.LoadInt64(&sentTotal) {
						time.Sleep(50 * time.Microsecond)
						continue
					}
					if _, err := conn.Receive(); err != nil {
						die("xadd: %v", err)
					}
					<-slots
					n++
					atomic.AddInt64(&acked, 1)
				}
			}()
			chunk := window // commands per Flush: never more than the slots, or the writer waits on itself
			if chunk > 256 {
				chunk = 256
			}
			var i int64
			for time.Since(start).Seconds() < seconds {
				for k := 0; k < chunk; k++ {
					slots <- struct{}{}
					if err := conn.Send("XADD", key, "*", "v", valueAt(buf, i, size)); err != nil {
						die("send: %v", err)
					}
					i++
				}
				if err := conn.Flush(); err != nil {
					die("flush: %v", err)
				}
				atomic.StoreInt64(&sentTotal, i)
			}
			close(stop)
			<-readerDone
		}(s)
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	var stored int64
	for s := 0; s < streams; s++ {
		n, err := redis.Int64(c.Do("XLEN", streamName(s)))
		if err != nil {
			die("xlen: %v", err)
		}
		stored += n
	}
	if stored != acked {
		die("count check: %d acknowledged, %d stored", acked, stored)
	}
	emit(result{Mode: "redis-pub", Records: acked, Seconds: elapsed, Rate: float64(acked) / elapsed, Size: size,
		Window: window, Streams: streams, StoredBack: stored})
}

// one XREAD reply: [[key, [[id, [field, value]], ...]]]; returns entries, value bytes, last id
func parseXread(reply interface{}) (int64, int64, string) {
	streams, _ := reply.([]interface{})
	var n, nbytes int64
	last := ""
	for _, st := range streams {
		pair := st.([]interface{})
		for _, e := range pair[1].([]interface{}) {
			entry := e.([]interface{})
			last = string(entry[0].([]byte))
			fields := entry[1].([]interface{})
			nbytes += int64(len(fields[1].([]byte)))
			n++
		}
	}
	return n, nbytes, last
}

func redisSub(addr string, streams int, count int64, batch int) {
	var wg sync.WaitGroup
	var got, nbytes int64
	start := time.Now()
	for s := 0; s < streams; s++ {
		wg.Add(1)
		go func(s int) {
			defer wg.Done()
			conn := redisDial(addr)
			defer conn.Close()
			key := streamName(s)
			want, err := redis.Int64(conn.Do("XLEN", key))
			if err != nil {
				die("xlen: %v", err)
			}
			if count > 0 && count/int64(streams) < want {
				want = count / int64(streams)
			}
			last := "0-0"
			var n int64
			for n < want {
				reply, err := conn.Do("XREAD", "COUNT", batch, "STREAMS", key, last)
				if err != nil {
					die("xread: %v", err)
				}
				k, b, id := parseXread(reply)
				if k == 0 {
					die("xread: nothing after %s with %d of %d read", last, n, want)
				}
				n += k
				atomic.AddInt64(&nbytes, b)
				last = id
			}
			atomic.AddInt64(&got, n)
		}(s)
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	emit(result{Mode: "redis-sub", Records: got, Seconds: elapsed, Rate: float64(got) / elapsed,
		Size: int(nbytes / max64(got, 1)), Streams: streams, Window: batch})
}

func redisLat(addr string, size, rate int, seconds float64) {
	c := redisDial(addr)
	if _, err := c.Do("DEL", "lat"); err != nil {
		die("del: %v", err)
	}
	var mu sync.Mutex
	var lat []float64
	var received int64
	stop := make(chan struct{})
	ready := make(chan struct{})
	go func() {
		conn := redisDial(addr)
		defer conn.Close()
		last := "0-0" // the stream was deleted above: everything in it is this run's
		close(ready)
		for {
			select {
			case <-stop:
				return
			default:
			}
			reply, err := conn.Do("XREAD", "BLOCK", 200, "COUNT", 1000, "STREAMS", "lat", last)
			if err != nil {
				die("xread: %v", err)
			}
			now := time.Now().UnixNano()
			streams, _ := reply.([]interface{})
			for _, st := range streams {
				for _, e := range st.([]interface{})[1].([]interface{}) {
					entry := e.([]interface{})
					last = string(entry[0].([]byte))
					v := entry[1].([]interface{})[1].([]byte)
					mu.Lock()
					lat = append(lat, float64(now-int64(binary.LittleEndian.Uint64(v[:8])))/1e6)
					mu.Unlock()
					atomic.AddInt64(&received, 1)
				}
			}
		}
	}()
	<-ready
	buf := randomBuffer(65536 + size)
	sent := pace(rate, seconds, func(i int64) {
		v := append([]byte(nil), valueAt(buf, i, size)...)
		binary.LittleEndian.PutUint64(v[:8], uint64(time.Now().UnixNano()))
		if _, err := c.Do("XADD", "lat", "*", "v", v); err != nil {
			die("xadd: %v", err)
		}
	})
	waitFor(func() bool { return atomic.LoadInt64(&received) >= sent }, 10*time.Second)
	close(stop)
	mu.Lock()
	defer mu.Unlock()
	p50, p99, points := quantiles(lat)
	emit(result{Mode: "redis-lat", Records: int64(len(lat)), Seconds: seconds, Rate: float64(rate), Size: size,
		Streams: 1, P50Ms: p50, P99Ms: p99, LatencyMs: points})
}

func main() {
	if len(os.Args) < 2 {
		die("usage: peerbench MODE [flags]")
	}
	mode := os.Args[1]
	fs := flag.NewFlagSet(mode, flag.ExitOnError)
	url := fs.String("url", "nats://127.0.0.1:4222", "NATS server")
	addr := fs.String("addr", "127.0.0.1:6379", "Redis server")
	streams := fs.Int("streams", 1, "streams (one publisher/consumer each)")
	replicas := fs.Int("replicas", 1, "JetStream stream replicas")
	size := fs.Int("size", 100, "value bytes")
	window := fs.Int("window", 1000, "publishes in flight (NATS: async pending; Redis: pipelined XADDs)")
	seconds := fs.Float64("seconds", 3, "publish seconds")
	count := fs.Int64("count", 0, "records to consume (0: all)")
	batch := fs.Int("batch", 10000, "XREAD COUNT")
	rate := fs.Int("rate", 2000, "latency: records per second")
	_ = fs.Parse(os.Args[2:])
	switch mode {
	case "nats-pub":
		natsPub(*url, *streams, *replicas, *size, *window, *seconds)
	case "nats-sub":
		natsSub(*url, *streams, *count)
	case "nats-lat":
		natsLat(*url, *size, *rate, *seconds)
	case "redis-pub":
		redisPub(*addr, *streams, *size, *window, *seconds)
	case "redis-sub":
		redisSub(*addr, *streams, *count, *batch)
	case "redis-lat":
		redisLat(*addr, *size, *rate, *seconds)
	default:
		die("unknown mode %q", mode)
	}
}
