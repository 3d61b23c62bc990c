package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
)

// Job states.
const (
	JobRunning = "running"
	JobDone    = "done"
	JobFailed  = "failed"
)

// JobState is what GET answers of a background job of the admin API
// (a replay): its progress while it runs, its result once done.
type JobState struct {
	ID         string     `json:"id"`
	Kind       string     `json:"kind"`
	Project    string     `json:"project"`
	State      string     `json:"state"`
	StartedAt  time.Time  `json:"startedAt"`
	DoneAt     *time.Time `json:"doneAt"`
	Progress   any        `json:"progress,omitempty"`
	Result     any        `json:"result,omitempty"`
	Error      string     `json:"error,omitempty"`
	ElapsedSec float64    `json:"elapsedSeconds"`
}

// JobRun is the work of a job. It reports progress (any JSON value) as it
// goes, and returns the result to report once done.
type JobRun func(ctx context.Context, progress func(any)) (any, error)

// Jobs runs the admin API's background jobs and keeps their states in
// memory: the last Keep finished jobs, and every running one. A job ends
// with the process; its id is then unknown (404).
type Jobs struct {
	now  func() time.Time
	keep int
	ctx  context.Context
	stop context.CancelFunc

	mu    sync.Mutex
	jobs  map[string]*JobState
	order []string
	wg    sync.WaitGroup
}

// NewJobs returns an empty job table keeping the last keep jobs; now is
// the clock (nil: time.Now).
func NewJobs(keep int, now func() time.Time) *Jobs {
	if now == nil {
		now = time.Now
	}
	ctx, stop := context.WithCancel(context.Background())
	return &Jobs{now: now, keep: max(keep, 1), ctx: ctx, stop: stop, jobs: map[string]*JobState{}}
}

// Start runs run in the background and returns the job's first state.
func (j *Jobs) Start(kind, project string, run JobRun) JobState {
	var b [8]byte
	_, _ = rand.Read(b[:])
	st := &JobState{ID: hex.EncodeToString(b[:]), Kind: kind, Project: project, State: JobRunning, StartedAt: j.now().UTC()}
	j.mu.Lock()
	j.jobs[st.ID] = st
	j.order = append(j.order, st.ID)
	j.trim()
	first := *st
	j.mu.Unlock()
	j.wg.Add(1)
	go func() {
		defer j.wg.Done()
		res, err := run(j.ctx, func(p any) {
			j.mu.Lock()
			st.Progress = p
			j.mu.Unlock()
		})
		j.mu.Lock()
		defer j.mu.Unlock()
		done := j.now().UTC()
		st.DoneAt = &done
		if err != nil {
			st.State, st.Error = JobFailed, err.Error()
			return
		}
		st.State, st.Result = JobDone, res
	}()
	return first
}

// trim forgets the oldest finished jobs beyond keep (j.mu held).
func (j *Jobs) trim() {
	for len(j.order) > j.keep {
		dropped := false
		for i, id := range j.order {
			if j.jobs[id].State != JobRunning {
				delete(j.jobs, id)
				j.order = append(j.order[:i], j.order[i+1:]...)
				dropped = true
				break
			}
		}
		if !dropped {
			return
		}
	}
}

// Get returns a job's current state.
func (j *Jobs) Get(id string) (JobState, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	st, ok := j.jobs[id]
	if !ok {
		return JobState{}, false
	}
	out := *st
	end := j.now()
	if st.DoneAt != nil {
		end = *st.DoneAt
	}
	out.ElapsedSec = end.Sub(st.StartedAt).Seconds()
	return out, true
}

// Close cancels the running jobs and waits for them.
func (j *Jobs) Close() {
	j.stop()
	j.wg.Wait()
}

// startReplay is POST /admin/v1/projects/{project}/replays: 202 with the
// job's id and state; 404 for an unknown project, 422 for bad options.
func (a *Admin) startReplay(c *fiber.Ctx) error {
	if a.cfg.StartReplay == nil || a.cfg.Jobs == nil {
		return c.Status(fiber.StatusNotImplemented).JSON(fiber.Map{"error": "this process cannot replay"})
	}
	project := c.Params("project")
	run, err := a.cfg.StartReplay(c.UserContext(), project, c.Query("from"), c.Query("source"))
	if err != nil {
		return a.hookError(c, err)
	}
	st := a.cfg.Jobs.Start("replay", project, run)
	c.Set(fiber.HeaderLocation, "/admin/v1/projects/"+project+"/replays/"+st.ID)
	return c.Status(fiber.StatusAccepted).JSON(st)
}

// replayJob is GET /admin/v1/projects/{project}/replays/{id}.
func (a *Admin) replayJob(c *fiber.Ctx) error {
	if a.cfg.Jobs == nil {
		return c.Status(fiber.StatusNotImplemented).JSON(fiber.Map{"error": "this process cannot replay"})
	}
	st, ok := a.cfg.Jobs.Get(c.Params("id"))
	if !ok || st.Project != c.Params("project") || st.Kind != "replay" {
		return c.Status(fiber.StatusNotFound).JSON(fiber.Map{"error": "no such replay job (jobs are kept in memory until the process stops)"})
	}
	return c.JSON(st)
}

// reloadGeoIP is POST /admin/v1/geoip/reload: 200 once the database file
// was read again and swapped in.
func (a *Admin) reloadGeoIP(c *fiber.Ctx) error {
	if a.cfg.ReloadGeoIP == nil {
		return c.Status(fiber.StatusNotImplemented).JSON(fiber.Map{"error": "this process runs no ingest service"})
	}
	if err := a.cfg.ReloadGeoIP(); err != nil {
		if errors.Is(err, ErrNotFound) {
			return c.Status(fiber.StatusNotFound).JSON(fiber.Map{"error": err.Error()})
		}
		return c.Status(fiber.StatusUnprocessableEntity).JSON(fiber.Map{"error": err.Error()})
	}
	return c.JSON(fiber.Map{"reloaded": true})
}
