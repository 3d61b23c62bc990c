// Package natstest runs real nats-server processes for tests: a cluster of
// JetStream nodes on loopback ports, each a process of its own that a test
// can kill and start again, the way a node of a production cluster dies
// and comes back. The binary is the nats-server of the module version mf
// embeds, installed by .ci/nats.sh.
package natstest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mfhq/mf/internal/freeport"
)

// Cluster is a JetStream cluster of nats-server processes.
type Cluster struct {
	t     testing.TB
	bin   string
	nodes []*Node
	// scheme of URL (nats, or tls for a server that requires TLS) and the
	// options WaitReady connects with.
	scheme string
	opts   []nats.Option
}

// Node is one server of a Cluster.
type Node struct {
	Name   string
	Client string // host:port for clients
	conf   string
	dir    string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	out  *strings.Builder
}

// Binary returns the path of the nats-server binary: $MF_NATS_SERVER, else
// GOBIN or GOPATH/bin, else PATH.
func Binary() (string, error) {
	if b := os.Getenv("MF_NATS_SERVER"); b != "" {
		return b, nil
	}
	var dirs []string
	if gobin := os.Getenv("GOBIN"); gobin != "" {
		dirs = append(dirs, gobin)
	}
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		for _, p := range filepath.SplitList(strings.TrimSpace(string(out))) {
			dirs = append(dirs, filepath.Join(p, "bin"))
		}
	}
	for _, d := range dirs {
		if p := filepath.Join(d, "nats-server"); isExec(p) {
			return p, nil
		}
	}
	if p, err := exec.LookPath("nats-server"); err == nil {
		return p, nil
	}
	return "", errors.New("no nats-server binary (looked at $MF_NATS_SERVER, GOBIN, GOPATH/bin and PATH); install it with `bash .ci/nats.sh`")
}

func isExec(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// StartCluster starts n clustered JetStream servers and waits until the
// cluster has a JetStream leader. They are killed when t ends.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{t: t, bin: bin, scheme: "nats"}
	routes := make([]string, n)
	port := func() int {
		p, err := freeport.Port()
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	clients := make([]int, n)
	for i := range n {
		clients[i] = port()
		routes[i] = fmt.Sprintf("nats-route://127.0.0.1:%d", port())
	}
	root := t.TempDir()
	for i := range n {
		name := fmt.Sprintf("n%d", i+1)
		dir := filepath.Join(root, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		conf := filepath.Join(dir, "server.conf")
		body := fmt.Sprintf(`server_name: %s
listen: 127.0.0.1:%d
max_payload: 8MB
jetstream {
  store_dir: %q
  max_file_store: 2GB
  max_memory_store: 64MB
}
cluster {
  name: mf-test
  listen: %s
  routes: [%s]
}
`, name, clients[i], filepath.Join(dir, "js"), strings.TrimPrefix(routes[i], "nats-route://"), strings.Join(routes, ", "))
		if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		c.nodes = append(c.nodes, &Node{Name: name, Client: fmt.Sprintf("127.0.0.1:%d", clients[i]), conf: conf, dir: dir})
	}
	t.Cleanup(func() {
		for _, nd := range c.nodes {
			nd.kill()
		}
	})
	for _, nd := range c.nodes {
		c.Start(nd)
	}
	c.WaitReady(2 * time.Minute)
	return c
}

// Nodes returns the servers.
func (c *Cluster) Nodes() []*Node { return c.nodes }

// URL returns the comma-separated nats:// URLs of every node (the --log
// value).
func (c *Cluster) URL() string {
	var urls []string
	for _, nd := range c.nodes {
		urls = append(urls, c.scheme+"://"+nd.Client)
	}
	return strings.Join(urls, ",")
}

// Start starts a node (again) with its configuration and its data.
func (c *Cluster) Start(nd *Node) {
	c.t.Helper()
	nd.mu.Lock()
	defer nd.mu.Unlock()
	out := &strings.Builder{}
	cmd := exec.Command(c.bin, "-c", nd.conf)
	w := &lockedWriter{b: out}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("cannot start nats-server %s: %v", nd.Name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	nd.cmd, nd.done, nd.out = cmd, done, out
}

// Kill ends a node at once (SIGKILL), as a crash would.
func (c *Cluster) Kill(nd *Node) { nd.kill() }

// Pause stops a node where it is (SIGSTOP): its connections stay open
// and nothing answers on them, as a machine that hangs (a full disk, a
// stalled VM). Resume (SIGCONT) lets it go on. The signal is delivered
// asynchronously: on Linux, Pause returns once /proc says the process is
// stopped, so that nothing it answers afterwards was sent after Pause.
func (c *Cluster) Pause(nd *Node) {
	c.t.Helper()
	nd.signal(syscall.SIGSTOP)
	nd.mu.Lock()
	cmd := nd.cmd
	nd.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	stat := fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid)
	if _, err := os.Stat(stat); err != nil {
		return // not Linux: no way to see it
	}
	deadline := time.Now().Add(10 * time.Second)
	for !stoppedProc(stat) {
		if time.Now().After(deadline) {
			c.t.Fatalf("nats-server %s not stopped 10 s after SIGSTOP", nd.Name)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// stoppedProc reports whether every thread of the process whose
// /proc/PID/stat is stat is stopped (state T).
func stoppedProc(stat string) bool {
	tasks, err := filepath.Glob(filepath.Join(filepath.Dir(stat), "task", "*", "stat"))
	if err != nil || len(tasks) == 0 {
		tasks = []string{stat}
	}
	for _, p := range tasks {
		b, err := os.ReadFile(p)
		if err != nil {
			return false
		}
		// The state follows the command name's closing parenthesis.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 || i+2 >= len(s) || (s[i+2] != 'T' && s[i+2] != 't') {
			return false
		}
	}
	return true
}

// Resume lets a paused node go on.
func (c *Cluster) Resume(nd *Node) { nd.signal(syscall.SIGCONT) }

func (nd *Node) signal(sig syscall.Signal) {
	nd.mu.Lock()
	cmd := nd.cmd
	nd.mu.Unlock()
	if cmd != nil && cmd.Process != nil {
		_ = cmd.Process.Signal(sig)
	}
}

// StartServer starts one JetStream server, not clustered, with the lines
// of extra added to its configuration (tls { ... }, authorization { ... }),
// and waits until it answers, connecting with opts (its TLS and
// credentials) to a URL of scheme (nats or tls). It is killed when t ends.
func StartServer(t testing.TB, scheme, extra string, opts ...nats.Option) *Cluster {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	port, err := freeport.Port()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "n1")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "server.conf")
	body := fmt.Sprintf(`server_name: n1
listen: 127.0.0.1:%d
max_payload: 8MB
jetstream {
  store_dir: %q
  max_file_store: 2GB
  max_memory_store: 64MB
}
%s
`, port, filepath.Join(dir, "js"), extra)
	if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	c := &Cluster{t: t, bin: bin, scheme: scheme, opts: opts,
		nodes: []*Node{{Name: "n1", Client: fmt.Sprintf("127.0.0.1:%d", port), conf: conf, dir: dir}}}
	t.Cleanup(func() {
		for _, nd := range c.nodes {
			nd.signal(syscall.SIGCONT) // a paused node dies of SIGKILL too, but its wait may not see it at once
			nd.kill()
		}
	})
	c.Start(c.nodes[0])
	c.WaitReady(time.Minute)
	return c
}

func (nd *Node) kill() {
	nd.mu.Lock()
	cmd, done := nd.cmd, nd.done
	nd.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

// WaitReady waits until every running node answers and the cluster's
// JetStream answers an account request (it has a meta leader).
func (c *Cluster) WaitReady(within time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(within)
	var last error
	for time.Now().Before(deadline) {
		if last = c.ready(); last == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.t.Fatalf("NATS cluster not ready within %v: %v", within, last)
}

func (c *Cluster) ready() error {
	nc, err := nats.Connect(c.URL(), append([]nats.Option{nats.Timeout(2 * time.Second)}, c.opts...)...)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = js.AccountInfo(ctx)
	return err
}

// lockedWriter collects a process's output.
type lockedWriter struct {
	mu sync.Mutex
	b  *strings.Builder
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}
