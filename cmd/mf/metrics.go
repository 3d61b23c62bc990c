package main

import (
	"context"
	"fmt"
	"github.com/mfhq/mf/api"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mfhq/mf/ingest"
	"github.com/mfhq/mf/processor"
	"github.com/mfhq/mf/rollups"
	"github.com/mfhq/mf/storage/eventlog"
)

// metrics is the Prometheus registry of one mf process and the collectors
// of its parts (docs/metrics.md). GET /metrics on the admin listener
// answers it (operations contract section 4). The parts a process does
// not run have no collectors.
type metrics struct {
	reg     *prometheus.Registry
	http    *httpMetrics
	ingest  *ingest.Metrics    // with the ingest role
	proc    *processor.Metrics // with the process role
	rollups *rollups.Metrics   // with the process role
}

// newMetrics builds the registry of a process running roles: Go runtime
// and process collectors, the listeners', and those of each role's parts.
func newMetrics(roles role, now func() time.Time) (*metrics, error) {
	m := &metrics{reg: prometheus.NewRegistry()}
	if err := m.reg.Register(collectors.NewGoCollector()); err != nil {
		return nil, err
	}
	if err := m.reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, err
	}
	var err error
	if m.http, err = newHTTPMetrics(m.reg, now); err != nil {
		return nil, err
	}
	if roles.has(roleIngest) {
		if m.ingest, err = ingest.NewMetrics(m.reg); err != nil {
			return nil, err
		}
	}
	if roles.has(roleProcess) {
		if m.proc, err = processor.NewMetrics(m.reg, now); err != nil {
			return nil, err
		}
		if m.rollups, err = rollups.NewMetrics(m.reg); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// handler answers a scrape: the text exposition (or what the scraper
// negotiates), errors of one collector logged into the answer's status.
func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError, Registry: m.reg})
}

// watchLog adds the state of the log's streams, read at each scrape.
func (m *metrics) watchLog(lg *eventlog.Log) error {
	return m.reg.Register(newLogCollector(lg))
}

// watchReporting adds the counters of the reporting data layer's cache
// of decoded day partitions.
func (m *metrics) watchReporting(rep *api.Reporting) error {
	stat := func(f func(api.RowCacheStats) int64) func() float64 {
		return func() float64 { return float64(f(rep.CacheStats())) }
	}
	for _, c := range []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "mf_api_cache_hits_total",
			Help: "Lookups of decoded day partitions answered from the reporting data layer's cache."},
			stat(func(s api.RowCacheStats) int64 { return s.Hits })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "mf_api_cache_misses_total",
			Help: "Lookups of decoded day partitions the reporting data layer's cache did not hold."},
			stat(func(s api.RowCacheStats) int64 { return s.Misses })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "mf_api_cache_evictions_total",
			Help: "Decoded day partitions evicted from the reporting data layer's cache for room."},
			stat(func(s api.RowCacheStats) int64 { return s.Evictions })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "mf_api_cache_refused_total",
			Help: "Decoded day partitions not kept because only the reading request's own entries could have made room (a request's days exceed the budget)."},
			stat(func(s api.RowCacheStats) int64 { return s.Refused })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "mf_api_cache_bytes",
			Help: "Memory the reporting data layer's cache holds now."},
			stat(func(s api.RowCacheStats) int64 { return s.Bytes })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "mf_api_cache_limit_bytes",
			Help: "The reporting data layer's cache budget."},
			stat(func(s api.RowCacheStats) int64 { return s.Limit })),
	} {
		if err := m.reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// watchReader adds the counters of the tables' reader (the reporting
// API's cache of column chunks).
func (m *metrics) watchReader(rd *rollups.Reader) error {
	stat := func(f func(rollups.ReaderStats) int64) func() float64 {
		return func() float64 { return float64(f(rd.Stats())) }
	}
	for _, c := range []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "mf_reader_cache_hits_total",
			Help: "Lookups of decoded column chunks and footers answered from the reader's cache."},
			stat(func(s rollups.ReaderStats) int64 { return s.CacheHits })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "mf_reader_cache_misses_total",
			Help: "Lookups of decoded column chunks and footers the reader's cache did not hold."},
			stat(func(s rollups.ReaderStats) int64 { return s.CacheMisses })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "mf_reader_cache_evictions_total",
			Help: "Entries evicted from the reader's cache."},
			stat(func(s rollups.ReaderStats) int64 { return s.CacheEvictions })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "mf_reader_cache_bytes",
			Help: "Memory the reader's cache holds now."},
			stat(func(s rollups.ReaderStats) int64 { return s.CacheBytes })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "mf_reader_fetched_bytes_total",
			Help: "Bytes read from data files in the object store."},
			stat(func(s rollups.ReaderStats) int64 { return s.BytesFetched })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "mf_reader_manifest_fetches_total",
			Help: "Table manifests fetched because they changed."},
			stat(func(s rollups.ReaderStats) int64 { return s.ManifestGets })),
	} {
		if err := m.reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// logCollector reports the state of the log's streams at scrape time.
type logCollector struct {
	log                                         *eventlog.Log
	timeout                                     time.Duration
	messages, bytes, lastSeq, firstSeq, readers *prometheus.Desc
	up, maxBytes                                *prometheus.Desc
}

func newLogCollector(lg *eventlog.Log) *logCollector {
	topic := []string{"topic"}
	return &logCollector{log: lg, timeout: 2 * time.Second,
		messages: prometheus.NewDesc("mf_log_messages", "Messages a stream of the log holds.", topic, nil),
		bytes:    prometheus.NewDesc("mf_log_bytes", "Bytes a stream of the log holds.", topic, nil),
		lastSeq:  prometheus.NewDesc("mf_log_last_seq", "Position of the newest message of a stream.", topic, nil),
		firstSeq: prometheus.NewDesc("mf_log_first_seq", "Position of the oldest message a stream keeps.", topic, nil),
		readers:  prometheus.NewDesc("mf_log_consumers", "Consumers reading a stream.", topic, nil),
		up:       prometheus.NewDesc("mf_log_up", "1 when the log answered this scrape, 0 when it did not.", nil, nil),
		maxBytes: prometheus.NewDesc("mf_log_max_bytes", "Size cap of a stream of the log (at it, new messages are refused); absent when it has none.", topic, nil),
	}
}

func (c *logCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.messages, c.bytes, c.lastSeq, c.firstSeq, c.readers, c.up, c.maxBytes} {
		ch <- d
	}
}

func (c *logCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	stats, err := c.log.StreamStats(ctx)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 1)
	for _, s := range stats {
		ch <- prometheus.MustNewConstMetric(c.messages, prometheus.GaugeValue, float64(s.Messages), s.Topic)
		ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.GaugeValue, float64(s.Bytes), s.Topic)
		ch <- prometheus.MustNewConstMetric(c.lastSeq, prometheus.GaugeValue, float64(s.LastSeq), s.Topic)
		ch <- prometheus.MustNewConstMetric(c.firstSeq, prometheus.GaugeValue, float64(s.FirstSeq), s.Topic)
		ch <- prometheus.MustNewConstMetric(c.readers, prometheus.GaugeValue, float64(s.Consumers), s.Topic)
		if s.MaxBytes > 0 {
			ch <- prometheus.MustNewConstMetric(c.maxBytes, prometheus.GaugeValue, float64(s.MaxBytes), s.Topic)
		}
	}
}

// openMetrics builds the process's registry; the reader's counters join
// it once the reader exists (watchReader).
func (s *service) openMetrics() error {
	m, err := newMetrics(s.roles, time.Now)
	if err != nil {
		return fmt.Errorf("cannot build the metrics registry: %w", err)
	}
	if s.cfg.AccessLog == "true" {
		m.http.access = s.logger.With("log", "access")
	}
	s.metrics = m
	return nil
}

// ingestAdmin reports whether this `mf ingest` opens the admin listener:
// only when --admin-addr is given, so that an ingest process beside an
// `mf api` on the default address does not take its port.
func (s *service) ingestAdmin() bool {
	return s.roles == roleIngest && s.cfg.adminAddrSet
}

// watchListener adds a listener's connections: open now, and shed at its
// cap (connlimit.go) by reason.
func (m *metrics) watchListener(name string, g *gatedListener) error {
	labels := prometheus.Labels{"listener": name}
	for _, c := range []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "mf_http_connections", ConstLabels: labels,
			Help: "Connections a listener serves now (at most --http-max-conns)."},
			func() float64 { return float64(g.openConns()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "mf_http_connections_shed_total",
			ConstLabels: prometheus.Labels{"listener": name, "reason": "idle_closed"},
			Help:        "Connections a listener shed at its cap: idle_closed (an idle one closed to make room), refused (a new one answered 503)."},
			func() float64 { return float64(g.shed.evicted.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "mf_http_connections_shed_total",
			ConstLabels: prometheus.Labels{"listener": name, "reason": "refused"},
			Help:        "Connections a listener shed at its cap: idle_closed (an idle one closed to make room), refused (a new one answered 503)."},
			func() float64 { return float64(g.shed.refused.Load()) }),
	} {
		if err := m.reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
