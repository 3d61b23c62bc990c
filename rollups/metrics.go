package rollups

import "github.com/prometheus/client_golang/prometheus"

// Metrics are a Store's Prometheus collectors (docs/metrics.md). Build
// them with NewMetrics on the process's registry and pass them in
// Config.Metrics; a nil *Metrics records nothing.
type Metrics struct {
	// FilesWritten and BytesWritten count the data files a Store wrote
	// (commits and compaction outputs) and their bytes.
	FilesWritten, BytesWritten prometheus.Counter
	// Merges counts compaction merges committed; MergedFiles the files
	// they replaced.
	Merges, MergedFiles prometheus.Counter
	// Deleted counts data files deleted by collection, by kind: retired
	// (replaced, past the grace) or orphan (never committed).
	Deleted *prometheus.CounterVec
}

// NewMetrics builds the collectors and registers them on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		FilesWritten: prometheus.NewCounter(prometheus.CounterOpts{Name: "mf_rollups_files_written_total",
			Help: "Parquet data files written (commits and compaction outputs)."}),
		BytesWritten: prometheus.NewCounter(prometheus.CounterOpts{Name: "mf_rollups_written_bytes_total",
			Help: "Bytes of the Parquet data files written."}),
		Merges: prometheus.NewCounter(prometheus.CounterOpts{Name: "mf_rollups_compactions_total",
			Help: "Compaction merges committed."}),
		MergedFiles: prometheus.NewCounter(prometheus.CounterOpts{Name: "mf_rollups_compacted_files_total",
			Help: "Data files replaced by compaction merges."}),
		Deleted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mf_rollups_files_deleted_total",
			Help: "Data files deleted by collection, by kind (retired, orphan)."}, []string{"kind"}),
	}
	for _, c := range []prometheus.Collector{m.FilesWritten, m.BytesWritten, m.Merges, m.MergedFiles, m.Deleted} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	m.Deleted.WithLabelValues("retired")
	m.Deleted.WithLabelValues("orphan")
	return m, nil
}

func (m *Metrics) written(f DataFile) {
	if m != nil {
		m.FilesWritten.Inc()
		m.BytesWritten.Add(float64(f.Bytes))
	}
}

func (m *Metrics) compacted(st CompactStats) {
	if m != nil {
		m.Merges.Add(float64(st.Merges))
		m.MergedFiles.Add(float64(st.Inputs))
	}
}

func (m *Metrics) collected(st CollectStats) {
	if m != nil {
		m.Deleted.WithLabelValues("retired").Add(float64(st.Retired))
		m.Deleted.WithLabelValues("orphan").Add(float64(st.Orphans))
	}
}
