package eventlog

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/nats-io/nats-server/v2/server"
)

// startEmbedded starts the in-process NATS server with JetStream file
// storage under cfg.Dir and waits until it has recovered its streams.
func startEmbedded(cfg Config, logger *slog.Logger) (*server.Server, error) {
	if err := os.MkdirAll(cfg.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("cannot create log directory %q: %w", cfg.Dir, err)
	}
	opts := &server.Options{
		ServerName: "mf-embedded",
		DontListen: cfg.ListenAddr == "",
		JetStream:  true,
		StoreDir:   cfg.Dir,
		MaxPayload: cfg.MaxPayload,
		// The process owns signals; the server must not install handlers.
		NoSigs: true,
		// Only the memory of memory-backed streams, which mf does not use.
		JetStreamMaxMemory: 64 << 20,
	}
	switch cfg.Sync {
	case SyncPolicyAlways:
		opts.SyncAlways = true
	default:
		opts.SyncInterval = cfg.SyncInterval
	}
	if cfg.ListenAddr != "" {
		host, port, err := net.SplitHostPort(cfg.ListenAddr)
		if err != nil {
			return nil, fmt.Errorf("cannot use log listen address %q: %w", cfg.ListenAddr, err)
		}
		p, err := strconv.Atoi(port)
		if err != nil || p < 0 || p > 65535 {
			return nil, fmt.Errorf("cannot use log listen address %q: bad port", cfg.ListenAddr)
		}
		if p == 0 {
			p = server.RANDOM_PORT
		}
		opts.Host, opts.Port = host, p
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("cannot configure the embedded log server: %w", err)
	}
	sl := &serverLog{logger: logger.With("server", "nats")}
	ns.SetLoggerV2(sl, false, false, false)
	ns.Start()
	if !ns.ReadyForConnections(cfg.StartTimeout) {
		ns.Shutdown()
		return nil, fmt.Errorf("%w: the embedded log server was not ready within %s: %s", ErrUnavailable, cfg.StartTimeout, sl.lastFatal())
	}
	if !ns.JetStreamEnabled() {
		ns.Shutdown()
		return nil, fmt.Errorf("%w: the embedded log server could not start JetStream in %q: %s", ErrUnavailable, cfg.Dir, sl.lastFatal())
	}
	return ns, nil
}

// serverLog passes the NATS server's log to slog. Notices go to Debug: the
// server's start-up banner is long and Open logs one line of its own.
type serverLog struct {
	logger *slog.Logger
	mu     sync.Mutex
	fatal  string
}

func (s *serverLog) Noticef(format string, v ...any) {
	s.logger.Debug(strings.TrimSpace(fmt.Sprintf(format, v...)))
}

func (s *serverLog) Warnf(format string, v ...any) {
	s.logger.Warn(fmt.Sprintf(format, v...))
}

// Fatalf is logged as an error and remembered; the server does not stop the
// process through it, Open reports it instead.
func (s *serverLog) Fatalf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	s.mu.Lock()
	s.fatal = msg
	s.mu.Unlock()
	s.logger.Error(msg)
}

func (s *serverLog) Errorf(format string, v ...any) {
	s.logger.Error(fmt.Sprintf(format, v...))
}

func (s *serverLog) Debugf(format string, v ...any) {
	s.logger.Debug(fmt.Sprintf(format, v...))
}

func (s *serverLog) Tracef(string, ...any) {}

func (s *serverLog) lastFatal() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fatal == "" {
		return "no error was logged"
	}
	return s.fatal
}
