package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strconv"
	"strings"
)

// role is a set of the service's parts that one process runs.
type role uint8

const (
	roleIngest role = 1 << iota
	roleProcess
	roleAPI
	rolesAll = roleIngest | roleProcess | roleAPI
)

func (r role) has(x role) bool { return r&x != 0 }

// config holds the flags of contract section 1. Every flag also reads the
// environment variable named beside it; a flag given on the command line
// wins over the environment.
type config struct {
	Data           string // --data, MF_DATA
	IngestAddr     string // --ingest-addr, MF_INGEST_ADDR
	APIAddr        string // --api-addr, MF_API_ADDR
	AdminAddr      string // --admin-addr, MF_ADMIN_ADDR
	AdminToken     string // --admin-token, MF_ADMIN_TOKEN
	Provision      string // --provision, MF_PROVISION
	Log            string // --log, MF_LOG
	Store          string // --store, MF_STORE
	GeoIP          string // --geoip, MF_GEOIP
	TrustedProxies string // --trusted-proxies, MF_TRUSTED_PROXIES
	Fsync          string // --fsync, MF_FSYNC: "always" makes a 202 survive power loss
	LogLevel       string // --log-level, MF_LOG_LEVEL
	LogFormat      string // --log-format, MF_LOG_FORMAT: "text" or "json"
	APIPublicURL   string // --api-public-url, MF_API_PUBLIC_URL: the reporting API's base as clients reach it (links)
	RateLimitScale string // --rate-limit-scale, MF_RATE_LIMIT_SCALE: multiplies every /v1 rate budget (load tests)
}

func defaultConfig() config {
	return config{
		Data:           "./mf-data",
		IngestAddr:     "127.0.0.1:8080",
		APIAddr:        "127.0.0.1:8081",
		AdminAddr:      "127.0.0.1:8082",
		Fsync:          "interval",
		LogLevel:       "info",
		LogFormat:      "text",
		RateLimitScale: "1",
	}
}

// flagSpec binds one flag to its field and environment variable.
type flagSpec struct {
	name, env, help string
	field           *string
}

func (c *config) specs() []flagSpec {
	return []flagSpec{
		{"data", "MF_DATA", "directory where the embedded log and object store keep their files", &c.Data},
		{"ingest-addr", "MF_INGEST_ADDR", "listen address of the ingest and flag service (/v1)", &c.IngestAddr},
		{"api-addr", "MF_API_ADDR", "listen address of the reporting API (/api/v1)", &c.APIAddr},
		{"admin-addr", "MF_ADMIN_ADDR", "listen address of the admin API (/admin/v1)", &c.AdminAddr},
		{"admin-token", "MF_ADMIN_TOKEN", "bearer token for the admin API; without it only loopback callers are served", &c.AdminToken},
		{"provision", "MF_PROVISION", "provisioning file to apply before serving", &c.Provision},
		{"log", "MF_LOG", "nats://host:port[,host:port...] of an external NATS JetStream cluster (default: embedded)", &c.Log},
		{"store", "MF_STORE", "s3://ACCESS:SECRET@host:port/bucket?secure=false for MinIO or any S3 (default: local directory)", &c.Store},
		{"geoip", "MF_GEOIP", "MaxMind-format .mmdb country/region database", &c.GeoIP},
		{"trusted-proxies", "MF_TRUSTED_PROXIES", "comma-separated CIDRs allowed to set the client address by X-Forwarded-For", &c.TrustedProxies},
		{"fsync", "MF_FSYNC", `"interval" (a 202 survives a process crash) or "always" (it also survives power loss)`, &c.Fsync},
		{"log-level", "MF_LOG_LEVEL", "debug, info, warn or error", &c.LogLevel},
		{"log-format", "MF_LOG_FORMAT", "text or json", &c.LogFormat},
		{"api-public-url", "MF_API_PUBLIC_URL", "base URL of the reporting API as clients reach it, for links (default: from each request)", &c.APIPublicURL},
		{"rate-limit-scale", "MF_RATE_LIMIT_SCALE", "multiply every /v1 rate-limit budget by this factor (e.g. 1000 for a load test)", &c.RateLimitScale},
	}
}

// parseConfig reads the environment, then the command line.
func parseConfig(name string, args []string, getenv func(string) string, stderr io.Writer) (config, *flag.FlagSet, error) {
	cfg := defaultConfig()
	fs := flag.NewFlagSet("mf "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	for _, s := range cfg.specs() {
		if v := getenv(s.env); v != "" {
			*s.field = v
		}
		fs.StringVar(s.field, s.name, *s.field, s.help+" (env "+s.env+")")
	}
	if err := fs.Parse(args); err != nil {
		return cfg, fs, err
	}
	return cfg, fs, cfg.validate()
}

func (c config) validate() error {
	var errs []error
	if c.Data == "" && (c.Log == "" || c.Store == "") {
		errs = append(errs, errors.New("--data must not be empty while the log or the store is embedded"))
	}
	if c.Log != "" && !strings.HasPrefix(c.Log, "nats://") {
		errs = append(errs, fmt.Errorf("--log %q: want nats://host:port[,host:port...]", c.Log))
	}
	if c.Store != "" && !strings.HasPrefix(c.Store, "s3://") {
		errs = append(errs, fmt.Errorf("--store %q: want s3://ACCESS:SECRET@host:port/bucket?secure=false", c.Store))
	}
	if c.Fsync != "interval" && c.Fsync != "always" {
		errs = append(errs, fmt.Errorf("--fsync %q: want interval or always", c.Fsync))
	}
	if _, err := c.trustedProxies(); err != nil {
		errs = append(errs, err)
	}
	if c.GeoIP != "" {
		if _, err := os.Stat(c.GeoIP); err != nil {
			errs = append(errs, fmt.Errorf("--geoip: %w", err))
		}
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("--log-level %q: want debug, info, warn or error", c.LogLevel))
	}
	if f, err := strconv.ParseFloat(c.RateLimitScale, 64); err != nil || f <= 0 {
		errs = append(errs, fmt.Errorf("--rate-limit-scale %q: want a positive number", c.RateLimitScale))
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		errs = append(errs, fmt.Errorf("--log-format %q: want text or json", c.LogFormat))
	}
	return errors.Join(errs...)
}

func (c config) trustedProxies() ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range strings.Split(c.TrustedProxies, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if !strings.Contains(s, "/") {
			a, err := netip.ParseAddr(s)
			if err != nil {
				return nil, fmt.Errorf("--trusted-proxies: %q is neither an address nor a CIDR", s)
			}
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("--trusted-proxies: %q is not a CIDR: %v", s, err)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}
