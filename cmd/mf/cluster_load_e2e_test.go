package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mfhq/mf/storage/eventlog/natstest"
	"github.com/mfhq/mf/storage/storagetest"
)

// The cluster load test (go tool task bench:cluster, docs/deploy.md
// "Load on the cluster"): mf ingest on a three-node NATS cluster, loaded
// from a separate process (ingest/internal/loadgen -target), with the
// streams kept once (--log-replicas 1) and then three times (3), each arm
// on a fresh cluster; then, under load with 3 replicas and mf process and
// mf api beside it, the node leading the batches stream is SIGKILLed.

// clusterLoadConfig is the size of a run.
type clusterLoadConfig struct {
	// Arm is how long each arm sends.
	Arm time.Duration
	// Conns and Events of the two throughput arms' batches (the mix of
	// bench:ingest), and of the kill arm's (one browser a batch, counted).
	Conns, Events         int
	KillConns, KillEvents int
}

// defaultClusterLoad is bench:cluster's run: bench:ingest's 1,000-event
// batches over 8 connections; browser-sized batches of 10 events under
// the kill, so that the time to the next 202 is measured finely and the
// processor counts them all in a few seconds.
func defaultClusterLoad() clusterLoadConfig {
	return clusterLoadConfig{Arm: 20 * time.Second, Conns: 8, Events: 1000, KillConns: 8, KillEvents: 10}
}

// throughput is what one arm measured.
type throughput struct {
	Replicas     int
	EventsPerSec float64
	Answers      int // tries answered (any status)
	Non202       int // tries not answered 202 (failed requests included)
	P50, P99     time.Duration
	Max          time.Duration // the longest try
}

// killFigures is what the kill arm measured.
type killFigures struct {
	throughput
	Node string // the node killed (it led the batches stream)
	// ToNext202 is from the SIGKILL to the 202 of the first try sent
	// after it; FirstAfter to the first 202 received after it (a try in
	// flight may be answered sooner).
	ToNext202, FirstAfter time.Duration
	// NonAfter counts the tries not answered 202 from the kill to the
	// next 202.
	NonAfter int
	// Accepted is the batches answered 202 (each once); Counted the
	// people the reporting API counts (one a batch).
	Accepted, Counted int64
}

// loadAnswer is one line "answer SENT DONE STATUS ACCEPTED" of loadgen.
type loadAnswer struct {
	Sent, Done time.Time
	Status     int
	Accepted   int64
}

var (
	loadgenOnce sync.Once
	loadgenBin  string
	loadgenErr  error
)

// loadgenBinary builds ingest/internal/loadgen once, beside the mf binary.
func loadgenBinary(t testing.TB) string {
	t.Helper()
	loadgenOnce.Do(func() {
		loadgenBin = filepath.Join(filepath.Dir(mfBinary), "loadgen")
		out, err := exec.Command("go", "build", "-o", loadgenBin, "../../ingest/internal/loadgen").CombinedOutput()
		if err != nil {
			loadgenErr = fmt.Errorf("cannot build loadgen: %v\n%s", err, out)
		}
	})
	if loadgenErr != nil {
		t.Fatal(loadgenErr)
	}
	return loadgenBin
}

// runLoadgen runs loadgen against the ingest base URL for d and hands
// each answer line to onAnswer as it comes; it returns loadgen's other
// output once it has exited 0. It may run on a goroutine of its own: it
// fails nothing itself.
func runLoadgen(bin, ingest string, d time.Duration, conns, events int, shape string, retry bool, onAnswer func(loadAnswer), extra ...string) (string, error) {
	args := append([]string{"-target", ingest, "-key", demoSecretKey, "-duration", d.String(),
		"-conns", strconv.Itoa(conns), "-events", strconv.Itoa(events), "-shape", shape, "-answers"}, extra...)
	if retry {
		args = append(args, "-retry")
	}
	cmd := exec.Command(bin, args...)
	var errOut syncBuffer
	cmd.Stderr = &errOut
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("cannot start loadgen: %w", err)
	}
	var rest strings.Builder
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		if len(f) != 5 || f[0] != "answer" {
			rest.WriteString(line + "\n")
			continue
		}
		var n [4]int64
		for i := range n {
			if n[i], err = strconv.ParseInt(f[i+1], 10, 64); err != nil {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				return "", fmt.Errorf("loadgen line %q: %w", line, err)
			}
		}
		onAnswer(loadAnswer{Sent: time.Unix(0, n[0]), Done: time.Unix(0, n[1]), Status: int(n[2]), Accepted: n[3]})
	}
	if err := cmd.Wait(); err != nil {
		return "", fmt.Errorf("loadgen: %w\n%s%s", err, rest.String(), errOut.String())
	}
	return rest.String(), nil
}

// summarize computes an arm's figures from its answers.
func summarize(replicas int, answers []loadAnswer) throughput {
	f := throughput{Replicas: replicas, Answers: len(answers)}
	if len(answers) == 0 {
		return f
	}
	var lat []time.Duration
	var events int64
	first, last := answers[0].Sent, answers[0].Done
	for _, a := range answers {
		if a.Status != 0 {
			lat = append(lat, a.Done.Sub(a.Sent))
		}
		if a.Status == 202 {
			events += a.Accepted
		} else {
			f.Non202++
		}
		if a.Sent.Before(first) {
			first = a.Sent
		}
		if a.Done.After(last) {
			last = a.Done
		}
	}
	f.EventsPerSec = float64(events) / last.Sub(first).Seconds()
	if len(lat) > 0 {
		slices.Sort(lat)
		f.P50, f.P99, f.Max = lat[len(lat)/2], lat[min(len(lat)-1, len(lat)*99/100)], lat[len(lat)-1]
	}
	return f
}

// clusterBed starts a fresh three-node cluster and mf ingest on it with
// replicas copies of each stream, on a fresh bucket of the MinIO at
// minio, after checking that the streams have that many replicas.
func clusterBed(t testing.TB, minio string, replicas int) (*natstest.Cluster, []string, *mfProc) {
	t.Helper()
	cl := natstest.StartCluster(t, 3)
	shared := []string{"--log", cl.URL(), "--store", storagetest.FreshBucket(t, minio)}
	if code, out, errOut := runMF(t, nil, append(append([]string{"provision"}, shared...), demoFile)...); code != 0 {
		t.Fatalf("mf provision on the cluster: exit %d\n%s%s", code, out, errOut)
	}
	// The roles set the streams to replicas copies (provision made them
	// with the cluster's default, empty but for the catalog).
	shared = append(shared, "--log-replicas", strconv.Itoa(replicas))
	ing := startRole(t, "ingest", append(shared, "--rate-limit-scale", "100000")...)
	if info := batchesStream(t, cl); info.Config.Replicas != replicas {
		t.Fatalf("the batches stream has %d replicas, want %d", info.Config.Replicas, replicas)
	}
	return cl, shared, ing
}

// batchesStream reads the batches stream's configuration and cluster
// state from the cluster.
func batchesStream(t testing.TB, cl *natstest.Cluster) *jetstream.StreamInfo {
	t.Helper()
	nc, err := nats.Connect(cl.URL(), nats.Timeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, "MF_BATCHES")
	if err != nil {
		t.Fatalf("the batches stream: %v", err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatalf("the batches stream: %v", err)
	}
	return info
}

// stopCluster stops mf ingest and every node of an arm, so that the next
// arm has the machine to itself.
func stopCluster(t testing.TB, cl *natstest.Cluster, procs ...*mfProc) {
	t.Helper()
	for _, p := range procs {
		if c := p.stop(time.Minute); c != 0 {
			t.Errorf("mf: exit %d on SIGTERM; output:\n%s", c, tail(p.out.String(), 4000))
		}
	}
	for _, nd := range cl.Nodes() {
		cl.Kill(nd)
	}
}

// throughputArm runs one throughput arm.
func throughputArm(t testing.TB, minio string, replicas int, cfg clusterLoadConfig) throughput {
	t.Helper()
	cl, _, ing := clusterBed(t, minio, replicas)
	var answers []loadAnswer
	if _, err := runLoadgen(loadgenBinary(t), ing.ingest, cfg.Arm, cfg.Conns, cfg.Events, "mix", false,
		func(a loadAnswer) { answers = append(answers, a) }); err != nil {
		t.Fatal(err)
	}
	stopCluster(t, cl, ing)
	return summarize(replicas, answers)
}

// killArm runs the kill arm: three replicas, mf process and mf api
// beside ingest, loadgen resending each batch until 202; once a third of
// the arm has passed (and some batches are accepted) the node leading the
// batches stream is SIGKILLed. Afterwards the reporting API must count
// every accepted batch once.
func killArm(t testing.TB, minio string, cfg clusterLoadConfig) killFigures {
	t.Helper()
	cl, shared, ing := clusterBed(t, minio, 3)
	proc := startRole(t, "process", shared...)
	rep := startRole(t, "api", shared...)

	var (
		mu       sync.Mutex
		answers  []loadAnswer
		accepted int64
	)
	done := make(chan struct{})
	var loadErr error
	bin := loadgenBinary(t)
	start := time.Now()
	onAnswer := func(a loadAnswer) {
		mu.Lock()
		defer mu.Unlock()
		answers = append(answers, a)
		if a.Status == 202 {
			accepted++
		}
	}
	go func() {
		defer close(done)
		_, loadErr = runLoadgen(bin, ing.ingest, cfg.Arm, cfg.KillConns, cfg.KillEvents, "people", true, onAnswer)
	}()
	waitFor(t, cfg.Arm+time.Minute, func() bool {
		select {
		case <-done:
			t.Fatalf("loadgen ended before the kill: %v", loadErr)
		default:
		}
		mu.Lock()
		defer mu.Unlock()
		return accepted >= 10 && time.Since(start) >= cfg.Arm/3
	})
	leader := batchesStream(t, cl).Cluster.Leader
	var node *natstest.Node
	for _, nd := range cl.Nodes() {
		if nd.Name == leader {
			node = nd
		}
	}
	if node == nil {
		t.Fatalf("the batches stream's leader %q is none of the nodes", leader)
	}
	killAt := time.Now()
	cl.Kill(node)
	<-done
	if loadErr != nil {
		t.Fatal(loadErr)
	}
	// Every connection may have had a batch in flight across the kill,
	// answered only once the stream had a new leader and after the arm
	// ended: then no batch was sent after the kill, and one is, resent
	// until it is accepted.
	mu.Lock()
	sentAfter := slices.ContainsFunc(answers, func(a loadAnswer) bool { return a.Sent.After(killAt) })
	mu.Unlock()
	if !sentAfter {
		if _, err := runLoadgen(bin, ing.ingest, time.Millisecond, 1, cfg.KillEvents, "people", true, onAnswer,
			"-first-worker", strconv.Itoa(cfg.KillConns)); err != nil {
			t.Fatal(err)
		}
	}

	mu.Lock()
	k := killFigures{throughput: summarize(3, answers), Node: node.Name, Accepted: accepted}
	var next202, first202 *loadAnswer
	for i, a := range answers {
		if a.Status == 202 && a.Sent.After(killAt) && (next202 == nil || a.Done.Before(next202.Done)) {
			next202 = &answers[i]
		}
		if a.Status == 202 && a.Done.After(killAt) && (first202 == nil || a.Done.Before(first202.Done)) {
			first202 = &answers[i]
		}
	}
	if next202 == nil {
		mu.Unlock()
		t.Fatalf("no batch sent after node %s was killed was answered 202", node.Name)
	}
	k.ToNext202, k.FirstAfter = next202.Done.Sub(killAt), first202.Done.Sub(killAt)
	for _, a := range answers {
		if a.Status != 202 && a.Done.After(killAt) && a.Done.Before(next202.Done) {
			k.NonAfter++
		}
	}
	mu.Unlock()

	deadline := time.Now().Add(3 * time.Minute)
	for {
		if got, ok := overviewNumbers(t, rep.api)["people"].(float64); ok {
			k.Counted = int64(got)
		}
		if k.Counted == k.Accepted {
			break
		}
		if time.Now().After(deadline) {
			// Where they went: the log holds each accepted batch once
			// (a resend is a duplicate), and the processor's counters say
			// what it read and applied.
			st := batchesStream(t, cl).State
			code, _, metrics := do(t, "GET", proc.admin+"/metrics", nil)
			var lines []string
			for _, l := range strings.Split(string(metrics), "\n") {
				if strings.HasPrefix(l, "mf_processor_") && !strings.Contains(l, "_bucket") {
					lines = append(lines, l)
				}
			}
			t.Fatalf("the reporting API counts %d people 3 minutes after the load, want %d (one per accepted batch); "+
				"the batches stream holds %d messages (sequences %d to %d); mf process's /metrics (%d):\n%s\nmf process:\n%s\nmf api:\n%s",
				k.Counted, k.Accepted, st.Msgs, st.FirstSeq, st.LastSeq, code, strings.Join(lines, "\n"),
				tail(proc.out.String(), 4000), tail(rep.out.String(), 2000))
		}
		time.Sleep(time.Second) // the API allows 120 requests a minute
	}
	stopCluster(t, cl, ing, proc, rep)
	return k
}

// runClusterLoad runs the three arms and prints the figures.
func runClusterLoad(t testing.TB, cfg clusterLoadConfig) (one, three throughput, kill killFigures) {
	t.Helper()
	minio := storagetest.StartMinIO(t)
	loadgenBinary(t)
	before := loadAvg()
	one = throughputArm(t, minio, 1, cfg)
	three = throughputArm(t, minio, 3, cfg)
	kill = killArm(t, minio, cfg)
	var b strings.Builder
	fmt.Fprintf(&b, "cluster load: 3 nats-server nodes, mf ingest, loadgen apart; %v an arm; load average %s before, %s after\n", cfg.Arm, before, loadAvg())
	for _, f := range []throughput{one, three} {
		fmt.Fprintf(&b, "  %d replica(s): %.0f events/s (%d-event batches, %d connections), p50 %v p99 %v, %d of %d tries not 202\n",
			f.Replicas, f.EventsPerSec, cfg.Events, cfg.Conns, f.P50.Round(100*time.Microsecond), f.P99.Round(100*time.Microsecond), f.Non202, f.Answers)
	}
	fmt.Fprintf(&b, "  ratio 3/1 replicas: events/s %.2f, p99 %.2f\n", three.EventsPerSec/one.EventsPerSec, float64(three.P99)/float64(one.P99))
	fmt.Fprintf(&b, "  node %s (leader of the batches stream) SIGKILLed under load (3 replicas, %d-event batches, %d connections, mf process and mf api beside): "+
		"first 202 of a try sent after the kill %v after it (first 202 received: %v), %d tries not 202 meanwhile, the longest try %v; %.0f events/s, p99 %v over the arm; "+
		"%d batches accepted, %d counted by the reporting API\n",
		kill.Node, cfg.KillEvents, cfg.KillConns, kill.ToNext202.Round(time.Millisecond), kill.FirstAfter.Round(100*time.Microsecond), kill.NonAfter, kill.Max.Round(time.Millisecond),
		kill.EventsPerSec, kill.P99.Round(100*time.Microsecond), kill.Accepted, kill.Counted)
	fmt.Print(b.String())
	return one, three, kill
}

// loadAvg is the first three fields of /proc/loadavg ("?" elsewhere).
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "?"
}

// TestClusterLoad is bench:cluster in small (two seconds an arm): each arm
// yields figures, the streams have the replicas asked for, a batch sent
// after the leader's death is accepted, and the reporting API counts every
// accepted batch of the kill arm once. Slow-ish (three clusters): skipped
// with -short.
func TestClusterLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three NATS clusters one after another")
	}
	cfg := defaultClusterLoad()
	cfg.Arm, cfg.Conns, cfg.Events = 2*time.Second, 4, 100
	one, three, kill := runClusterLoad(t, cfg)
	for _, f := range []throughput{one, three, kill.throughput} {
		if f.EventsPerSec <= 0 || f.Answers == 0 || f.P99 <= 0 || f.P50 > f.P99 {
			t.Errorf("%d replicas: no figures: %+v", f.Replicas, f)
		}
	}
	if one.Non202 > 0 || three.Non202 > 0 {
		t.Errorf("tries not answered 202 without a fault: %d with 1 replica, %d with 3", one.Non202, three.Non202)
	}
	if kill.ToNext202 <= 0 || kill.Accepted == 0 || kill.Counted != kill.Accepted {
		t.Errorf("kill arm: %+v", kill)
	}
}

// BenchmarkClusterLoad is bench:cluster: run it with -benchtime 1x (it
// runs its arms once whatever b.N is). MF_BENCH_CLUSTER_ARM sets how long
// each arm sends (default 20s).
func BenchmarkClusterLoad(b *testing.B) {
	cfg := defaultClusterLoad()
	if s := os.Getenv("MF_BENCH_CLUSTER_ARM"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			b.Fatalf("MF_BENCH_CLUSTER_ARM=%q: want a positive duration such as 20s", s)
		}
		cfg.Arm = d
	}
	one, three, kill := runClusterLoad(b, cfg)
	b.ReportMetric(one.EventsPerSec, "events/s-r1")
	b.ReportMetric(three.EventsPerSec, "events/s-r3")
	b.ReportMetric(three.EventsPerSec/one.EventsPerSec, "ratio-r3/r1")
	b.ReportMetric(float64(one.P99.Microseconds())/1000, "p99-ms-r1")
	b.ReportMetric(float64(three.P99.Microseconds())/1000, "p99-ms-r3")
	b.ReportMetric(float64(kill.ToNext202.Milliseconds()), "kill-to-202-ms")
}
