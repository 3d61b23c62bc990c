package ingest

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mfhq/mf/storage/records"
)

// Metrics are the /v1 service's Prometheus collectors (docs/metrics.md).
// Build them with NewMetrics on the process's registry and pass them in
// Config.Metrics and FlagDocumentsConfig.Metrics; a nil *Metrics records
// nothing. Label values come from small fixed sets: HTTP statuses, the
// receipt reasons of the specification, outcomes.
type Metrics struct {
	// Batches counts batch requests answered, by HTTP status
	// (mf_ingest_batches_total, operations contract section 4).
	Batches *prometheus.CounterVec
	// Events counts the events of answered batches by outcome, accepted
	// or dropped, as their receipts say (mf_ingest_events_total).
	Events *prometheus.CounterVec
	// Receipts counts 202 answers by receipt reason: "" kept something,
	// or bot, install_check, ingestion_paused, allowance_exhausted.
	Receipts *prometheus.CounterVec
	// BodyBytes is the size of batch request bodies.
	BodyBytes prometheus.Histogram
	// RateLimited counts batch requests refused with 429.
	RateLimited prometheus.Counter
	// PublishSeconds is the time a batch waits for the log to store it,
	// by outcome: stored, duplicate or error.
	PublishSeconds *prometheus.HistogramVec
	// DocumentsCompiled counts flag documents compiled (a view of a
	// project whose content changed).
	DocumentsCompiled prometheus.Counter
	// LogFull counts batch requests refused 503 sink_unavailable because
	// the log reached its size cap (mf_ingest_log_full_total).
	LogFull prometheus.Counter

	// byStatus caches the Batches child of each status (the hot path
	// skips the label lookup).
	byStatus          [600]atomic.Pointer[prometheus.Counter]
	accepted, dropped prometheus.Counter
	// The children of the fixed label values, made once (read-only after
	// NewMetrics).
	byReason                   map[string]prometheus.Counter
	stored, duplicate, failure prometheus.Observer
}

// NewMetrics builds the collectors and registers them on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		Batches: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mf_ingest_batches_total",
			Help: "Batch requests answered, by HTTP status."}, []string{"status"}),
		Events: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mf_ingest_events_total",
			Help: "Events in answered batches, by outcome (accepted or dropped) as the receipts say."}, []string{"outcome"}),
		Receipts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mf_ingest_receipts_total",
			Help: `Batches answered 202, by receipt reason ("" when events were kept).`}, []string{"reason"}),
		BodyBytes: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "mf_ingest_batch_body_bytes",
			Help: "Size of batch request bodies.", Buckets: prometheus.ExponentialBuckets(256, 4, 8)}),
		RateLimited: prometheus.NewCounter(prometheus.CounterOpts{Name: "mf_ingest_rate_limited_total",
			Help: "Batch requests refused with 429 by a rate limit."}),
		PublishSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "mf_ingest_publish_duration_seconds",
			Help:    "Time a batch waits for the log to store it, by outcome (stored, duplicate, error).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 10}}, []string{"outcome"}),
		DocumentsCompiled: prometheus.NewCounter(prometheus.CounterOpts{Name: "mf_flags_documents_compiled_total",
			Help: "Flag documents compiled (a view of a project whose content changed)."}),
		LogFull: prometheus.NewCounter(prometheus.CounterOpts{Name: "mf_ingest_log_full_total",
			Help: "Batch requests refused 503 sink_unavailable because the log reached its size cap (nothing stored)."}),
	}
	for _, c := range []prometheus.Collector{m.Batches, m.Events, m.Receipts, m.BodyBytes, m.RateLimited, m.PublishSeconds, m.DocumentsCompiled, m.LogFull} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	m.accepted, m.dropped = m.Events.WithLabelValues("accepted"), m.Events.WithLabelValues("dropped")
	m.byReason = map[string]prometheus.Counter{}
	for _, r := range []string{"", ReceiptBot, ReceiptInstallCheck, ReceiptIngestionPaused, ReceiptAllowanceExhaust} {
		m.byReason[r] = m.Receipts.WithLabelValues(r)
	}
	m.stored = m.PublishSeconds.WithLabelValues("stored")
	m.duplicate = m.PublishSeconds.WithLabelValues("duplicate")
	m.failure = m.PublishSeconds.WithLabelValues("error")
	for _, s := range []int{202, 400, 401, 403, 413, 429, 503} {
		m.batchStatus(s)
	}
	return m, nil
}

// batchStatus returns the Batches child of an HTTP status.
func (m *Metrics) batchStatus(status int) prometheus.Counter {
	if status < 100 || status >= len(m.byStatus) {
		return m.Batches.WithLabelValues(strconv.Itoa(status))
	}
	if c := m.byStatus[status].Load(); c != nil {
		return *c
	}
	c := m.Batches.WithLabelValues(strconv.Itoa(status))
	m.byStatus[status].Store(&c)
	return c
}

// measureBatch wraps a batch handler: it counts the answer by status and
// the body's size. An error the handler returns is answered here, so that
// the status counted is the one sent.
func (s *Server) measureBatch(h fiber.Handler) fiber.Handler {
	m := s.cfg.Metrics
	if m == nil {
		return h
	}
	return func(c *fiber.Ctx) error {
		m.BodyBytes.Observe(float64(len(c.Body())))
		if err := h(c); err != nil {
			if herr := s.onError(c, err); herr != nil {
				return herr
			}
		}
		status := c.Response().StatusCode()
		m.batchStatus(status).Inc()
		if status == fiber.StatusTooManyRequests {
			m.RateLimited.Inc()
		}
		return nil
	}
}

// answerReceipt answers a batch 202 with its receipt and counts its
// events.
func (s *Server) answerReceipt(c *fiber.Ctx, r records.Receipt) error {
	if m := s.cfg.Metrics; m != nil {
		m.accepted.Add(float64(r.Accepted))
		m.dropped.Add(float64(r.Dropped))
		if c, ok := m.byReason[r.Reason]; ok {
			c.Inc()
		} else {
			m.Receipts.WithLabelValues(r.Reason).Inc()
		}
	}
	return c.Status(fiber.StatusAccepted).JSON(r)
}

// observePublish records how long a publish to the log took.
func (m *Metrics) observePublish(took time.Duration, duplicate bool, err error) {
	if m == nil {
		return
	}
	o := m.stored
	switch {
	case err != nil:
		o = m.failure
	case duplicate:
		o = m.duplicate
	}
	o.Observe(took.Seconds())
}

// logFull counts a batch refused because the log is full.
func (m *Metrics) logFull() {
	if m != nil {
		m.LogFull.Inc()
	}
}

// documentsCompiled counts n flag documents compiled.
func (m *Metrics) documentsCompiled(n int) {
	if m != nil && n > 0 {
		m.DocumentsCompiled.Add(float64(n))
	}
}
