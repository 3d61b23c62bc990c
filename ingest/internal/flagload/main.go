// Command flagload measures the flag endpoints over loopback: it starts
// the /v1 service on real parts (flagstack: embedded log, catalog, local
// object store) with a project of -flags flags, then runs the load from a
// separate process (itself, re-executed with -load) so that the server and
// the load generator are measured as two programs sharing the machine.
//
//	go run ./ingest/internal/flagload [-duration 5s] [-conns 32] [-flags 100]
//
// Scenarios: GET /v1/flags answered 304 (If-None-Match with the current
// ETag), GET /v1/flags answered 200 (identity and gzip), and the browser
// document GET /v1/flags/{websiteKey}. The rate limits are raised for the
// run: one load process is one client address.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/mfhq/mf/ingest"
	"github.com/mfhq/mf/ingest/internal/flagstack"
)

const (
	websiteKey = "mf_loadweb1_Load-Website-Key"
	secretKey  = "mf_loadsrv1_Load-Secret-Key_0123456789abcdefghijkl"
)

func main() {
	load := flag.Bool("load", false, "run as the load process (internal)")
	target := flag.String("url", "", "load: the URL to request")
	header := flag.String("header", "", "load: request headers, name: value, separated by |")
	duration := flag.Duration("duration", 5*time.Second, "how long each scenario runs")
	conns := flag.Int("conns", 32, "concurrent connections of the load process")
	flags := flag.Int("flags", 100, "flags of the project (read by website and servers)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the server process to this file")
	flag.Parse()
	if *load {
		if err := runLoad(*target, *header, *duration, *conns); err != nil {
			fmt.Fprintln(os.Stderr, "flagload:", err)
			os.Exit(1)
		}
		return
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "flagload:", err)
			os.Exit(1)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "flagload:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	if err := run(*duration, *conns, *flags); err != nil {
		fmt.Fprintln(os.Stderr, "flagload:", err)
		os.Exit(1)
	}
}

// result is what the load process reports.
type result struct {
	Requests int            `json:"requests"`
	Errors   int            `json:"errors"`
	Status   map[string]int `json:"status"`
	Seconds  float64        `json:"seconds"`
	P50      float64        `json:"p50us"`
	P99      float64        `json:"p99us"`
	Bytes    int64          `json:"bytes"`
}

func run(duration time.Duration, conns, nflags int) error {
	dir, err := os.MkdirTemp("", "flagload-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, err := flagstack.Start(ctx, flagstack.Options{
		Dir:       dir,
		Provision: provisionFile(nflags),
		Ingest: func(c *ingest.Config) {
			c.Limits.FlagsPerAddress.Amount = 1e12
			c.Limits.FlagsGetWebsite.Amount = 1e12
			c.Limits.FlagsPostWebsite.Amount = 1e12
			c.Limits.FlagsGetServer.Amount = 1e12
			c.Limits.SegmentUnitsPerKey.Amount = 1e12
		},
	})
	if err != nil {
		return err
	}
	defer st.Close()
	// Wait for the documents of the provisioned catalog.
	for st.Flags.Version() < st.Catalog.State().Version() {
		time.Sleep(time.Millisecond)
	}
	req, _ := http.NewRequest("GET", st.URL+"/v1/flags", nil)
	req.Header.Set("Authorization", "Bearer "+secretKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	etag := resp.Header.Get("ETag")
	if resp.StatusCode != 200 || etag == "" {
		return fmt.Errorf("GET /v1/flags: %d %s", resp.StatusCode, body)
	}
	browser, err := http.Get(st.URL + "/v1/flags/" + websiteKey)
	if err != nil {
		return err
	}
	bbody, _ := io.ReadAll(browser.Body)
	browser.Body.Close()

	fmt.Printf("flagload: %d flags; server document %d bytes, browser document %d bytes; %d connections, %s per scenario\n",
		nflags, len(body), len(bbody), conns, duration)
	fmt.Printf("%-34s %10s %8s %9s %9s %s\n", "scenario", "req/s", "errors", "p50 µs", "p99 µs", "statuses")
	auth := "Authorization: Bearer " + secretKey
	for _, sc := range []struct{ name, path, header string }{
		{"GET /v1/flags 304", "/v1/flags", auth + "|If-None-Match: " + etag},
		{"GET /v1/flags 200", "/v1/flags", auth},
		{"GET /v1/flags 200 gzip", "/v1/flags", auth + "|Accept-Encoding: gzip"},
		{"GET /v1/flags/{websiteKey} 200", "/v1/flags/" + websiteKey, ""},
		{"GET /v1/flags/{websiteKey} 200 gzip", "/v1/flags/" + websiteKey, "Accept-Encoding: gzip"},
	} {
		self, err := os.Executable()
		if err != nil {
			return err
		}
		cmd := exec.Command(self, "-load", "-url", st.URL+sc.path, "-header", sc.header,
			"-duration", duration.String(), "-conns", fmt.Sprint(conns))
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("load process for %s: %w", sc.name, err)
		}
		var r result
		if err := json.Unmarshal(out.Bytes(), &r); err != nil {
			return fmt.Errorf("load process for %s: %w: %s", sc.name, err, out.Bytes())
		}
		var statuses []string
		for k, v := range r.Status {
			statuses = append(statuses, fmt.Sprintf("%s×%d", k, v))
		}
		slices.Sort(statuses)
		fmt.Printf("%-34s %10.0f %8d %9.0f %9.0f %s\n", sc.name, float64(r.Requests)/r.Seconds, r.Errors, r.P50, r.P99, strings.Join(statuses, " "))
	}
	return nil
}

// runLoad requests target from conns connections for duration and prints
// a result as JSON.
func runLoad(target, header string, duration time.Duration, conns int) error {
	u, err := url.Parse(target)
	if err != nil {
		return err
	}
	hc := &fasthttp.HostClient{Addr: u.Host, MaxConns: conns, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second}
	var headers [][2]string
	for _, h := range strings.Split(header, "|") {
		if k, v, ok := strings.Cut(h, ":"); ok {
			headers = append(headers, [2]string{strings.TrimSpace(k), strings.TrimSpace(v)})
		}
	}
	var (
		requests, errors atomic.Int64
		bytesRead        atomic.Int64
		mu               sync.Mutex
		status           = map[string]int{}
		lat              []time.Duration
	)
	deadline := time.Now().Add(duration)
	start := time.Now()
	var wg sync.WaitGroup
	for i := 0; i < conns; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			req.SetRequestURI(target)
			for _, h := range headers {
				req.Header.Set(h[0], h[1])
			}
			local := map[int]int{}
			var mine []time.Duration
			for n := 0; time.Now().Before(deadline); n++ {
				t0 := time.Now()
				if err := hc.DoTimeout(req, resp, 10*time.Second); err != nil {
					errors.Add(1)
					continue
				}
				if n%16 == 0 {
					mine = append(mine, time.Since(t0))
				}
				local[resp.StatusCode()]++
				bytesRead.Add(int64(len(resp.Body())))
				requests.Add(1)
			}
			mu.Lock()
			for k, v := range local {
				status[fmt.Sprint(k)] += v
			}
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	slices.Sort(lat)
	pct := func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		return float64(lat[int(p*float64(len(lat)-1))].Microseconds())
	}
	return json.NewEncoder(os.Stdout).Encode(result{
		Requests: int(requests.Load()), Errors: int(errors.Load()), Status: status,
		Seconds: elapsed, P50: pct(0.50), P99: pct(0.99), Bytes: bytesRead.Load(),
	})
}

// provisionFile is one project with n flags read by both, a website source
// and a server source.
func provisionFile(n int) []byte {
	var flags []string
	for i := 0; i < n; i++ {
		rules := `[{"sh":5000,"w":[["a",5000],["b",5000]]}]`
		if i%5 == 0 {
			rules = `[{"if":[["p","plan","is",["pro"]]],"x":"b"},{"w":[["a",5000],["b",5000]]}]`
		}
		flags = append(flags, fmt.Sprintf(`{"key":"flag-%04d","readBy":"both","t":"m","u":"b","d":"a","s":"seed%08d","r":%s}`, i, i, rules))
	}
	return []byte(`{"organizations":[{"id":"c1000000-0000-4000-8000-000000000001","slug":"load","name":"Load","plan":"pro",
	  "projects":[{"id":"c2000000-0000-4000-8000-000000000001","slug":"load","name":"Load","timezone":"UTC","reportingCurrency":"USD",
	    "sources":[{"id":"c3000000-0000-4000-8000-000000000001","name":"Web","kind":"website","mode":"full","key":"` + websiteKey + `"},
	               {"id":"c3000000-0000-4000-8000-000000000002","name":"Server","kind":"server","mode":"full","key":"` + secretKey + `"}],
	    "flags":[` + strings.Join(flags, ",") + `]}]}]}`)
}
