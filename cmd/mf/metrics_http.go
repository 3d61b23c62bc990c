package main

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
)

// httpMetrics counts the requests each listener answers: the contract's
// families by listener and status (mf_http_requests_total,
// mf_http_request_duration_seconds), and the same by route pattern
// (mf_http_route_requests_total, mf_http_route_duration_seconds). A
// route pattern is the path a route was registered with
// ("/v1/batch/:key"), never the path asked for.
type httpMetrics struct {
	requests, routeRequests *prometheus.CounterVec
	duration, routeDuration *prometheus.HistogramVec
	now                     func() time.Time
	// access, when set, logs every request answered (--access-log).
	access *slog.Logger
}

func newHTTPMetrics(reg prometheus.Registerer, now func() time.Time) (*httpMetrics, error) {
	buckets := []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mf_http_requests_total",
			Help: "Requests answered, by listener (ingest, api, admin) and HTTP status."}, []string{"listener", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "mf_http_request_duration_seconds",
			Help: "Time to answer a request, by listener.", Buckets: buckets}, []string{"listener"}),
		routeRequests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mf_http_route_requests_total",
			Help: "Requests answered, by listener, route pattern and HTTP status."}, []string{"listener", "route", "status"}),
		routeDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "mf_http_route_duration_seconds",
			Help: "Time to answer a request, by listener and route pattern.", Buckets: buckets}, []string{"listener", "route"}),
		now: now,
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration, m.routeRequests, m.routeDuration} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// routeKey is the request value that names the route a request reached.
type routeKey struct{}

// routeStats are the collectors of one route of one listener, with the
// request counters of the statuses it answered so far.
type routeStats struct {
	pattern  string
	mu       sync.RWMutex
	duration prometheus.Observer // made at the first answer
	byStatus map[int]prometheus.Counter
}

func newRouteStats(pattern string) *routeStats {
	return &routeStats{pattern: pattern, byStatus: map[int]prometheus.Counter{}}
}

// observe counts one answer of the route: its status and time. The
// children of a route are made at its first answer, so that routes never
// asked for add nothing to a scrape.
func (r *routeStats) observe(m *httpMetrics, listener string, status int, took float64) {
	r.mu.RLock()
	c, ok := r.byStatus[status]
	d := r.duration
	r.mu.RUnlock()
	if !ok || d == nil {
		r.mu.Lock()
		if r.duration == nil {
			r.duration = m.routeDuration.WithLabelValues(listener, r.pattern)
		}
		if c, ok = r.byStatus[status]; !ok {
			c = m.routeRequests.WithLabelValues(listener, r.pattern, strconv.Itoa(status))
			r.byStatus[status] = c
		}
		d = r.duration
		r.mu.Unlock()
	}
	c.Inc()
	d.Observe(took)
}

// instrument makes app's requests counted as listener's. It runs once the
// app's routes are registered and before it serves: each route first
// notes itself on the request (the last one a request reaches names it),
// and the web server's handler is wrapped to time the whole answer,
// error handler included, and read the status sent.
func (m *httpMetrics) instrument(listener string, app *fiber.App) {
	unmatched := newRouteStats("unmatched")
	patterns := map[string]*routeStats{}
	for _, routes := range app.Stack() {
		for _, r := range routes {
			rs := patterns[r.Path]
			if rs == nil {
				rs = newRouteStats(r.Path)
				patterns[r.Path] = rs
			}
			note := func(c *fiber.Ctx) error {
				c.Context().SetUserValue(routeKey{}, rs)
				return c.Next()
			}
			r.Handlers = append([]fiber.Handler{note}, r.Handlers...)
		}
	}
	total := m.duration.WithLabelValues(listener)
	var mu sync.RWMutex
	byStatus := map[int]prometheus.Counter{}
	count := func(status int) prometheus.Counter {
		mu.RLock()
		c, ok := byStatus[status]
		mu.RUnlock()
		if ok {
			return c
		}
		c = m.requests.WithLabelValues(listener, strconv.Itoa(status))
		mu.Lock()
		byStatus[status] = c
		mu.Unlock()
		return c
	}
	srv := app.Server()
	next := srv.Handler
	srv.Handler = func(ctx *fasthttp.RequestCtx) {
		// The web server notes when it hands a request to the handler
		// (ctx.Time): reading the clock costs as much as the rest of the
		// counting, so it is read once more only.
		start := ctx.Time()
		next(ctx)
		took := m.now().Sub(start).Seconds()
		status := ctx.Response.StatusCode()
		rs, _ := ctx.UserValue(routeKey{}).(*routeStats)
		if rs == nil {
			rs = unmatched
		}
		count(status).Inc()
		total.Observe(took)
		rs.observe(m, listener, status, took)
		if m.access != nil {
			// The route pattern, never the path as asked (ids, keys) or
			// its query string (the specification forbids storing the
			// reporting API's); no client address.
			m.access.LogAttrs(context.Background(), slog.LevelInfo, "request", slog.String("listener", listener),
				slog.String("method", string(ctx.Method())), slog.String("route", rs.pattern), slog.Int("status", status),
				slog.Float64("seconds", took), slog.Int("bytes", len(ctx.Response.Body())))
		}
	}
}
