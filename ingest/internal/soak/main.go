package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// Config is the soak's configuration (its flags).
type Config struct {
	// MF is the mf binary; Provision the provisioning file the project,
	// keys and API key come from.
	MF, Provision string
	// Key is the source key the batches are sent with: a website key (in
	// the path, with an allowed Origin) or a server key (bearer).
	Key string
	// Origin overrides the Origin header of website batches ("": the
	// source's first https allowed origin).
	Origin string
	// APIKey reads the reporting API.
	APIKey string
	// Rate in events per second, for Duration, in batches of Batch events
	// sent over Conns connections.
	Rate     float64
	Duration time.Duration
	Batch    int
	Conns    int
	// Browsers is the pool of simulated browsers (anonymousIds) active at
	// a time; People the user ids their sign-ins draw from (0: a quarter
	// of Browsers).
	Browsers, People int
	// Sample is the interval of the table's lines.
	Sample time.Duration
	// Warmup is where the warm-up ends (0: a sixth of Duration).
	Warmup time.Duration
	// Drain bounds the wait for the processor to catch up after the load.
	Drain time.Duration
	// MaxRSS stops the load when mf's RSS passes it (bytes; 0: never), to
	// spare a shared machine.
	MaxRSS int64
	// RateLimitScale is mf's --rate-limit-scale: the website key's budgets
	// are a browser's, not a load test's.
	RateLimitScale string
	// Seed makes the traffic repeatable.
	Seed uint64
	// Dir keeps mf's data there ("": a temporary directory, removed).
	Dir string
}

// DefaultConfig is issue 14's soak: 20,000 events/s of 10-event batches
// for 30 minutes (36 million events) with the demo website key.
func DefaultConfig() Config {
	return Config{
		MF: "bin/mf", Provision: "docs/demo-provision.json",
		Key:    "mf_demoweb1_Website-Key_1",
		APIKey: "mf_pat_demo0001_DemoDemoDemoDemoDemoDemoDemoDemoDemoDemo",
		Rate:   20000, Duration: 30 * time.Minute, Batch: 10, Conns: 256,
		Browsers: 200000, Sample: 10 * time.Second, Drain: 30 * time.Minute,
		MaxRSS: 8 << 30, RateLimitScale: "1000", Seed: 14,
	}
}

// Validate reports a setting that cannot work.
func (c Config) Validate() error {
	switch {
	case c.MF == "" || c.Provision == "" || c.Key == "" || c.APIKey == "":
		return errors.New("-mf, -provision, -key and -api-key must not be empty")
	case c.Rate <= 0:
		return errors.New("-rate must be positive")
	case c.Duration <= 0:
		return errors.New("-duration must be positive")
	case c.Batch < 1 || c.Batch > 1000:
		return errors.New("-batch must be 1 to 1000 events (the specification's limit)")
	case c.Conns < 1:
		return errors.New("-conns must be at least 1")
	case c.Browsers < c.Conns:
		return fmt.Errorf("-browsers must be at least -conns (%d): each connection sends for its own browsers", c.Conns)
	case c.People < 0:
		return errors.New("-people must not be negative")
	case c.Sample < 100*time.Millisecond:
		return errors.New("-sample must be at least 100ms")
	case c.Warmup < 0 || c.Warmup >= c.Duration:
		return errors.New("-warmup must be at least 0 and shorter than -duration")
	case c.Drain <= 0:
		return errors.New("-drain must be positive")
	case c.MaxRSS < 0:
		return errors.New("-max-rss must not be negative")
	}
	return nil
}

// warmup is where the warm-up ends.
func (c Config) warmup() time.Duration {
	if c.Warmup > 0 {
		return c.Warmup
	}
	return c.Duration / 6
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run parses args, runs the soak and returns the exit code: 0 when every
// accepted event is counted, 1 when not or when the soak failed, 2 for a
// usage error.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg := DefaultConfig()
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.MF, "mf", cfg.MF, "path of the mf binary")
	fs.StringVar(&cfg.Provision, "provision", cfg.Provision, "provisioning file with the project, its keys and the API key")
	fs.StringVar(&cfg.Key, "key", cfg.Key, "source key to send with: a website key (path, Origin) or a server secret key (bearer)")
	fs.StringVar(&cfg.Origin, "origin", cfg.Origin, "Origin header of website batches (default: the source's first https allowed origin)")
	fs.StringVar(&cfg.APIKey, "api-key", cfg.APIKey, "reporting API key of a user of the project's organization")
	fs.Float64Var(&cfg.Rate, "rate", cfg.Rate, "events per second")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "how long to send")
	fs.IntVar(&cfg.Batch, "batch", cfg.Batch, "events per batch (a browser's batch is small)")
	fs.IntVar(&cfg.Conns, "conns", cfg.Conns, "concurrent connections (each sends for its share of the browsers)")
	fs.IntVar(&cfg.Browsers, "browsers", cfg.Browsers, "browsers (anonymousIds) active at a time; each leaves after a few visits and a new one arrives")
	fs.IntVar(&cfg.People, "people", cfg.People, "user ids that sign-ins draw from (default: a quarter of -browsers)")
	fs.DurationVar(&cfg.Sample, "sample", cfg.Sample, "interval of the table's lines")
	fs.DurationVar(&cfg.Warmup, "warmup", cfg.Warmup, "end of the warm-up, for the RSS growth (default: a sixth of -duration)")
	fs.DurationVar(&cfg.Drain, "drain", cfg.Drain, "longest wait for the processor to catch up after the load")
	fs.Int64Var(&cfg.MaxRSS, "max-rss", cfg.MaxRSS, "stop the load when mf's RSS passes this many bytes (0: never)")
	fs.StringVar(&cfg.RateLimitScale, "rate-limit-scale", cfg.RateLimitScale, "mf's --rate-limit-scale")
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the traffic")
	fs.StringVar(&cfg.Dir, "dir", cfg.Dir, "keep mf's data in this directory (default: a temporary one, removed)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "soak: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if cfg.People == 0 {
		cfg.People = max(cfg.Browsers/4, 1)
	}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(stderr, "soak: %v\n", err)
		return 2
	}
	if err := soak(ctx, cfg, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "soak: %v\n", err)
		return 1
	}
	return 0
}
