package main

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/mfhq/mf/storage"
	"github.com/mfhq/mf/storage/eventlog"
)

// health probes what a listener's work depends on, in the background, so
// that /healthz answers from the last probe without waiting for the log
// or the store: a /healthz asked every second must not add to an outage.
// Each listener's /healthz is 200 {"status":"ok"} (the contract's answer)
// only while the process is ready and every part its work needs answers;
// otherwise 503 with a body naming the failing parts:
//
//	{"status":"unavailable","failing":["log"],"checks":{"log":"unavailable","store":"ok"}}
//
// ingest needs the log; api the log and the store; admin (the process's
// own health) the log, the store when the process runs the processor or
// the API, and the processor when it runs it. A listener at its
// connection cap answers the same shape with "listener" failing
// (connlimit.go). The reasons go to the log, not to the answer: /healthz
// is not authenticated.
type health struct {
	log      *eventlog.Log
	bucket   storage.Bucket
	logger   *slog.Logger
	interval time.Duration
	timeout  time.Duration
	gauge    *prometheus.GaugeVec

	mu     sync.Mutex
	failed map[string]error // by check: log, store
}

// healthProbeKey is the object the store check reads: missing, so the
// store answers "not found" when it is up.
const healthProbeKey = "health/probe"

func newHealth(lg *eventlog.Log, b storage.Bucket, reg prometheus.Registerer, logger *slog.Logger) (*health, error) {
	h := &health{log: lg, bucket: b, logger: logger, interval: 2 * time.Second, timeout: 3 * time.Second,
		failed: map[string]error{}}
	h.gauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "mf_health_check_ok",
		Help: "1 while a dependency answered its last health probe (log, store), else 0."}, []string{"check"})
	if err := reg.Register(h.gauge); err != nil {
		return nil, err
	}
	return h, nil
}

// run probes every interval until ctx ends.
func (h *health) run(ctx context.Context) {
	t := time.NewTicker(h.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		h.probe(ctx)
	}
}

// probe checks the log and the store once.
func (h *health) probe(ctx context.Context) {
	var wg sync.WaitGroup
	check := func(name string, f func(context.Context) error) {
		defer wg.Done()
		cctx, cancel := context.WithTimeout(ctx, h.timeout)
		err := f(cctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		h.set(name, err)
	}
	wg.Add(2)
	go check("log", h.log.Check)
	go check("store", func(ctx context.Context) error {
		_, err := h.bucket.Attributes(ctx, healthProbeKey)
		if errors.Is(err, storage.ErrNotFound) {
			return nil
		}
		return err
	})
	wg.Wait()
}

func (h *health) set(name string, err error) {
	h.mu.Lock()
	was, had := h.failed[name]
	if err != nil {
		h.failed[name] = err
	} else {
		delete(h.failed, name)
	}
	h.mu.Unlock()
	switch {
	case err != nil && !had:
		h.logger.Warn("health: a dependency does not answer; /healthz says so", "check", name, "err", err)
		h.gauge.WithLabelValues(name).Set(0)
	case err == nil && had:
		h.logger.Info("health: a dependency answers again", "check", name, "was", was)
		h.gauge.WithLabelValues(name).Set(1)
	case err == nil:
		h.gauge.WithLabelValues(name).Set(1)
	}
}

// healthReport is the body of a /healthz that is not ok.
type healthReport struct {
	Status  string            `json:"status"`
	Failing []string          `json:"failing"`
	Checks  map[string]string `json:"checks"`
}

// healthReport returns the state of the checks a listener needs; ok when none
// fails.
func (s *service) healthReport(listener string) (healthReport, bool) {
	var needs []string
	switch listener {
	case "ingest":
		needs = []string{"log"}
	case "api":
		needs = []string{"log", "store"}
	default:
		needs = []string{"log"}
		if s.roles.has(roleProcess) || s.roles.has(roleAPI) {
			needs = append(needs, "store")
		}
	}
	r := healthReport{Status: "unavailable", Checks: map[string]string{}}
	s.health.mu.Lock()
	for _, n := range needs {
		r.Checks[n] = "ok"
		if s.health.failed[n] != nil {
			r.Checks[n] = "unavailable"
			r.Failing = append(r.Failing, n)
		}
	}
	s.health.mu.Unlock()
	if listener == "admin" && s.proc != nil {
		r.Checks["processor"] = "ok"
		if !s.proc.p.Ready() {
			r.Checks["processor"] = "stopped"
			r.Failing = append(r.Failing, "processor")
		}
	}
	slices.Sort(r.Failing)
	return r, len(r.Failing) == 0
}

// healthz answers GET /healthz of a listener when a check fails, and
// leaves the app to answer otherwise (200, or 503 while starting).
func (s *service) healthz(listener string, srv *fasthttp.Server) {
	next := srv.Handler
	srv.Handler = func(ctx *fasthttp.RequestCtx) {
		if string(ctx.Path()) == "/healthz" && s.ready.Load() {
			if r, ok := s.healthReport(listener); !ok {
				b, _ := json.Marshal(r)
				ctx.SetStatusCode(fasthttp.StatusServiceUnavailable)
				ctx.SetContentType("application/json")
				ctx.Response.Header.Set("Retry-After", "1")
				ctx.SetBody(b)
				return
			}
		}
		next(ctx)
	}
}
