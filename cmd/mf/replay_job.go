package main

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/mfhq/mf/api"
	"github.com/mfhq/mf/processor"
	"github.com/mfhq/mf/rollups"
	"github.com/mfhq/mf/storage"
)

// jobs returns the admin API's job table, made at the first call.
func (s *service) jobs() *api.Jobs {
	if s.adminJobs == nil {
		s.adminJobs = api.NewJobs(100, time.Now)
	}
	return s.adminJobs
}

// replayProgress is how far a replay is, as the admin API reports it
// (GET /admin/v1/projects/{project}/replays/{id}, "progress") and mf
// replay shows it. A replay reads the project's history, then writes the
// new tables: BytesRead of BytesTotal (the events table's data files; 0
// when unknown, as for a replay from the log), then files written.
type replayProgress struct {
	Phase        string `json:"phase"` // "reading" or "writing"
	BytesRead    int64  `json:"bytesRead"`
	BytesTotal   int64  `json:"bytesTotal"`
	FilesWritten int64  `json:"filesWritten"`
	BytesWritten int64  `json:"bytesWritten"`
}

// replayTracker measures one replay through the counters of its own
// Reader (bytes fetched) and Store (files written).
type replayTracker struct {
	reader  *rollups.Reader
	written *rollups.Metrics
	total   int64
	every   time.Duration
}

// newReplayTracker opens the reader of a replay of project and sums the
// bytes of the events table it is going to read.
func newReplayTracker(ctx context.Context, b storage.Bucket, project string) (*replayTracker, error) {
	rd, err := rollups.NewReader(b, rollups.DefaultReaderConfig(), nil)
	if err != nil {
		return nil, fmt.Errorf("cannot open the tables: %w", err)
	}
	wm, err := rollups.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		return nil, err
	}
	t := &replayTracker{reader: rd, written: wm, every: 250 * time.Millisecond}
	sn, err := rd.Snapshot(ctx, project)
	if err != nil {
		return nil, fmt.Errorf("cannot read the tables of project %q: %w", project, err)
	}
	m := sn.Manifest()
	if ts := m.Table(processor.TableEvents); ts != nil {
		for _, part := range ts.PartitionNames() {
			for _, f := range m.Files(processor.TableEvents, part) {
				t.total += f.Bytes
			}
		}
	}
	return t, nil
}

// now returns the replay's progress.
func (t *replayTracker) now() replayProgress {
	p := replayProgress{BytesRead: t.reader.Stats().BytesFetched, BytesTotal: t.total,
		FilesWritten: int64(counterValue(t.written.FilesWritten)), BytesWritten: int64(counterValue(t.written.BytesWritten))}
	p.Phase = "reading"
	if p.FilesWritten > 0 {
		p.Phase = "writing"
	}
	if p.BytesTotal > 0 && p.BytesRead > p.BytesTotal {
		p.BytesTotal = p.BytesRead
	}
	return p
}

// follow reports the progress every t.every until the returned stop is
// called, which reports it a last time.
func (t *replayTracker) follow(report func(any)) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(t.every)
		defer tick.Stop()
		for {
			report(t.now())
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() {
		close(done)
		<-finished
		report(t.now())
	}
}

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if c.Write(&m) != nil || m.Counter == nil {
		return 0
	}
	return m.Counter.GetValue()
}
