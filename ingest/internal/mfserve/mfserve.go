package mfserve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mfhq/mf/internal/freeport"
)

// Config says which mf to start and how.
type Config struct {
	// Binary is the path of the mf binary.
	Binary string
	// Data is the --data directory (required; the caller owns it).
	Data string
	// Provision is a provisioning file applied at start ("" for none).
	Provision string
	// Args are further flags of mf serve (for example --rate-limit-scale).
	Args []string
	// Env is added to this process's environment.
	Env []string
	// Stdout and Stderr receive mf's output (nil: discarded).
	Stdout, Stderr io.Writer
	// Healthy bounds the wait for every listener's /healthz.
	Healthy time.Duration
}

// DefaultConfig starts bin/mf and waits up to a minute for it.
func DefaultConfig() Config {
	return Config{Binary: "bin/mf", Healthy: time.Minute}
}

// Validate reports a setting that cannot work.
func (c Config) Validate() error {
	switch {
	case c.Binary == "":
		return errors.New("the path of the mf binary is empty")
	case c.Data == "":
		return errors.New("the data directory is empty")
	case c.Healthy <= 0:
		return errors.New("the wait for health must be positive")
	}
	return nil
}

// Server is one running mf serve.
type Server struct {
	// Ingest, API and Admin are the listeners' base URLs
	// (http://127.0.0.1:port).
	Ingest, API, Admin string

	cmd  *exec.Cmd
	done chan struct{}
	err  error // of Wait, once done is closed
}

// Start starts mf serve and waits until its ingest, reporting and admin
// listeners answer /healthz with 200. ctx bounds the start only.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("cannot start mf: %w", err)
	}
	var addrs [3]string
	for i := range addrs {
		a, err := FreeAddr()
		if err != nil {
			return nil, err
		}
		addrs[i] = a
	}
	args := []string{"serve", "--data", cfg.Data,
		"--ingest-addr", addrs[0], "--api-addr", addrs[1], "--admin-addr", addrs[2]}
	if cfg.Provision != "" {
		args = append(args, "--provision", cfg.Provision)
	}
	args = append(args, cfg.Args...)
	cmd := exec.Command(cfg.Binary, args...)
	cmd.Stdout, cmd.Stderr = cfg.Stdout, cfg.Stderr
	cmd.Env = append(os.Environ(), cfg.Env...)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("cannot start %s: %w", cfg.Binary, err)
	}
	s := &Server{Ingest: "http://" + addrs[0], API: "http://" + addrs[1], Admin: "http://" + addrs[2],
		cmd: cmd, done: make(chan struct{})}
	go func() { s.err = cmd.Wait(); close(s.done) }()
	if err := s.waitHealthy(ctx, cfg.Healthy); err != nil {
		s.Kill()
		return nil, err
	}
	return s, nil
}

func (s *Server) waitHealthy(ctx context.Context, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	for _, base := range []string{s.Ingest, s.API, s.Admin} {
		var last error
		for {
			req, _ := http.NewRequestWithContext(ctx, "GET", base+"/healthz", nil)
			resp, err := client.Do(req)
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
				err = fmt.Errorf("status %d", resp.StatusCode)
			}
			last = err
			t := time.NewTimer(50 * time.Millisecond)
			select {
			case <-s.done:
				t.Stop()
				return fmt.Errorf("mf exited before it was healthy: %v", s.err)
			case <-ctx.Done():
				t.Stop()
				return fmt.Errorf("%s/healthz did not answer 200 within %v (last: %v)", base, within, last)
			case <-t.C:
			}
		}
	}
	return nil
}

// Pid is the process id of mf.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// Done is closed once mf has exited.
func (s *Server) Done() <-chan struct{} { return s.done }

// ExitErr is what waiting for mf returned, once Done is closed.
func (s *Server) ExitErr() error {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}

// RSS is mf's resident memory in bytes, from /proc.
func (s *Server) RSS() (int64, error) { return ReadRSS(s.Pid()) }

// Stop sends SIGTERM and waits up to within for mf to exit, then kills it.
// It returns mf's exit error (nil for exit 0).
func (s *Server) Stop(within time.Duration) error {
	select {
	case <-s.done:
		return s.err
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(within)
	defer t.Stop()
	select {
	case <-s.done:
		return s.err
	case <-t.C:
		s.Kill()
		return fmt.Errorf("mf did not exit within %v of SIGTERM and was killed", within)
	}
}

// Kill ends mf at once and waits for it.
func (s *Server) Kill() {
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Kill()
	<-s.done
}

// FreeAddr returns a loopback address whose port was free a moment ago,
// from below the ephemeral range (see package freeport).
func FreeAddr() (string, error) {
	a, err := freeport.Addr()
	if err != nil {
		return "", fmt.Errorf("cannot find a free loopback port: %w", err)
	}
	return a, nil
}

// ReadRSS reads the resident memory (VmRSS) of process pid from
// /proc/pid/status, in bytes.
func ReadRSS(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("cannot read the memory of process %d: %w", pid, err)
	}
	return ParseVmRSS(data)
}

// ParseVmRSS finds the VmRSS line of a /proc/pid/status text and returns
// its value in bytes.
func ParseVmRSS(status []byte) (int64, error) {
	for _, line := range strings.Split(string(status), "\n") {
		rest, ok := strings.CutPrefix(line, "VmRSS:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("cannot read the line %q of /proc status", line)
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("cannot read the line %q of /proc status: %w", line, err)
		}
		return n * 1024, nil
	}
	return 0, errors.New("no VmRSS line in /proc status (a kernel thread, or not Linux)")
}
