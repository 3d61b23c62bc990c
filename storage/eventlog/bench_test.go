package eventlog

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/mfhq/mf/storage/records"
)

// benchPayloadSize is the size of a large ingest batch as the log stores it.
const benchPayloadSize = 300 << 10

// BenchmarkPublish measures PublishOnce (the ingest path: a dedupe id, a
// synchronous PubAck) of 300 KiB messages on the embedded server, for each
// fsync policy, with one publisher and with eight concurrent ones. ns/op and
// MB/s are throughput; p50-ms and p99-ms are the latency of one publish.
// The store goes to MF_BENCH_DIR when set (use a directory on the disk you
// want to measure: the default temporary directory may be a tmpfs, on which
// fsync costs nothing).
func BenchmarkPublish(b *testing.B) {
	payload := make([]byte, benchPayloadSize)
	if _, err := rand.Read(payload); err != nil {
		b.Fatal(err)
	}
	policies := []struct {
		name     string
		sync     SyncPolicy
		interval time.Duration
	}{
		{"interval-1s", SyncPolicyInterval, time.Second},
		{"interval-2m", SyncPolicyInterval, 2 * time.Minute},
		{"always", SyncPolicyAlways, 0},
	}
	for _, p := range policies {
		for _, publishers := range []int{1, 8} {
			b.Run(fmt.Sprintf("sync=%s/publishers=%d", p.name, publishers), func(b *testing.B) {
				dir := b.TempDir()
				if base := os.Getenv("MF_BENCH_DIR"); base != "" {
					var err error
					if dir, err = os.MkdirTemp(base, "bench"); err != nil {
						b.Fatal(err)
					}
					b.Cleanup(func() { os.RemoveAll(dir) })
				}
				cfg := testConfig(dir)
				cfg.Sync = p.sync
				if p.interval > 0 {
					cfg.SyncInterval = p.interval
				}
				l := openLog(b, cfg)
				pub := l.Publisher()
				ctx := context.Background()
				latencies := make([]time.Duration, b.N)
				var next atomic.Int64
				var wg sync.WaitGroup
				b.SetBytes(benchPayloadSize)
				b.ReportAllocs()
				b.ResetTimer()
				for range publishers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for {
							i := int(next.Add(1)) - 1
							if i >= b.N {
								return
							}
							id := "batch-" + strconv.Itoa(i)
							start := time.Now()
							if _, err := pub.PublishOnce(ctx, "batches.bench", id, message.NewMessage(id, payload)); err != nil {
								b.Error(err)
								return
							}
							latencies[i] = time.Since(start)
						}
					}()
				}
				wg.Wait()
				b.StopTimer()
				slices.Sort(latencies)
				ms := func(q float64) float64 {
					return float64(latencies[int(q*float64(len(latencies)-1))]) / float64(time.Millisecond)
				}
				b.ReportMetric(ms(0.50), "p50-ms")
				b.ReportMetric(ms(0.99), "p99-ms")
			})
		}
	}
}

// BenchmarkConsume measures a subscriber reading messages and acking each:
// ns/op is the time per message. "large" are
// 300 KiB messages (a big batch), "small" 600 bytes (a browser batch of one
// to three events, the common case).
//
// Each size is read from a position (replay mode, SubscribeAfter: how the
// processor reads) and in a consumer group (acked message by message). The
// process's CPU time per message is reported too (cpu-ns/msg: server,
// client and subscriber together).
func BenchmarkConsume(b *testing.B) {
	for _, size := range []struct {
		name  string
		bytes int
	}{{"large", benchPayloadSize}, {"small", 600}} {
		for _, mode := range []string{"position", "group", "partition"} {
			b.Run(size.name+"/"+mode, func(b *testing.B) { benchConsume(b, size.bytes, mode) })
		}
	}
}

// benchConsume reads b.N messages of one key: from a position on the
// whole topic, in a consumer group, or from a position on the key's
// partition (what a processor of a partitioned log does).
func benchConsume(b *testing.B, size int, mode string) {
	group := ""
	if mode == "group" {
		group = "bench"
	}
	payload := make([]byte, size)
	if _, err := rand.Read(payload); err != nil {
		b.Fatal(err)
	}
	l := openLog(b, testConfig(b.TempDir()))
	pub := l.Publisher()
	msgs := make([]*message.Message, 0, 1000)
	for i := range b.N {
		msgs = append(msgs, message.NewMessage(strconv.Itoa(i), payload))
		if len(msgs) == cap(msgs) || i == b.N-1 {
			if err := pub.Publish("batches.bench", msgs...); err != nil {
				b.Fatal(err)
			}
			msgs = msgs[:0]
		}
	}
	sub, err := l.Subscriber(DefaultSubscriberConfig(group))
	if err != nil {
		b.Fatal(err)
	}
	var ch <-chan *message.Message
	if mode == "partition" {
		ch, err = sub.SubscribePartitionAfter(context.Background(), "batches", PartitionOf("bench", l.Partitions("batches")), 0)
	} else {
		ch, err = sub.Subscribe(context.Background(), "batches")
	}
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	for range b.N {
		m := <-ch
		m.Ack()
	}
	b.StopTimer()
	b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/msg")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	sub.Close()
}

// processCPU is the CPU time the process used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkDedupeMemory measures the memory the embedded server keeps per
// dedupe id in the batches stream's window: b.N batches of a few bytes
// published with PublishOnce, the heap in use after a collection before
// and after, per id ("heap-B/id"). "batch-id" uses BatchDedupeID; "long"
// the former "<project>:<batch id>" (73 characters).
func BenchmarkDedupeMemory(b *testing.B) {
	const project = "0b5e6f1c-9a7d-4e2b-8c3f-2d1e0f9a8b7c"
	for _, format := range []struct {
		name string
		id   func(records.UUID) string
	}{
		{"batch-id", func(id records.UUID) string { return BatchDedupeID(project, id) }},
		{"long", func(id records.UUID) string { return project + ":" + id.String() }},
	} {
		b.Run(format.name, func(b *testing.B) {
			l := openLog(b, testConfig(b.TempDir()))
			pub := l.Publisher()
			ctx := context.Background()
			payload := []byte("{}")
			before := heapInUse()
			b.ResetTimer()
			for i := range b.N {
				var u records.UUID
				if _, err := rand.Read(u[:]); err != nil {
					b.Fatal(err)
				}
				if _, err := pub.PublishOnce(ctx, "batches.bench", format.id(u), message.NewMessage(strconv.Itoa(i), payload)); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			after := heapInUse()
			b.ReportMetric(float64(after-before)/float64(b.N), "heap-B/id")
		})
	}
}

// heapInUse is the heap in use after a collection.
func heapInUse() int64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}
