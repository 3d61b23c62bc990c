package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
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
	PrintSecrets   string // --print-secrets, MF_PRINT_SECRETS: "true" shows full secret keys in the banner (the demo)
	AccessLog      string // --access-log, MF_ACCESS_LOG: "true" logs every request answered (slog)
	LogReplicas    string // --log-replicas, MF_LOG_REPLICAS: copies of each stream ("": 1 embedded, 3 on a cluster, at most its size)
	LogCreds       string // --log-creds, MF_LOG_CREDS: a NATS credentials file (JWT and NKey seed)
	LogNKey        string // --log-nkey, MF_LOG_NKEY: a file holding a NATS NKey user seed
	LogTLSCA       string // --log-tls-ca, MF_LOG_TLS_CA: PEM CA certificates the NATS servers' certificates are checked against
	LogTLSCert     string // --log-tls-cert, MF_LOG_TLS_CERT: PEM client certificate for NATS servers that verify clients
	LogTLSKey      string // --log-tls-key, MF_LOG_TLS_KEY: its PEM private key
	LeaseTTL       string // --lease-ttl, MF_LEASE_TTL: how long a processor's partition lease outlives its last renewal
	APICacheBytes  string // --api-cache-bytes, MF_API_CACHE_BYTES: the reporting API's memory for decoded tables ("": from the machine's memory)
	LogMaxBytes    string // --log-max-bytes, MF_LOG_MAX_BYTES: size cap of the batches stream ("": chosen, docs/operations.md)
	LogRetention   string // --log-retention, MF_LOG_RETENTION: how long committed batches stay in the log

	// Listener limits (each listener on its own).
	HTTPReadTimeout  string // --http-read-timeout, MF_HTTP_READ_TIMEOUT: to read a whole request
	HTTPWriteTimeout string // --http-write-timeout, MF_HTTP_WRITE_TIMEOUT: to write a whole answer
	HTTPIdleTimeout  string // --http-idle-timeout, MF_HTTP_IDLE_TIMEOUT: a kept-alive connection waits this long for its next request
	HTTPMaxConns     string // --http-max-conns, MF_HTTP_MAX_CONNS: open connections per listener

	// adminAddrSet: --admin-addr or MF_ADMIN_ADDR was given (mf ingest
	// then opens the admin listener too, for /metrics).
	adminAddrSet bool
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
		PrintSecrets:   "false",
		AccessLog:      "false",
		LeaseTTL:       "15s",
		LogRetention:   "144h",

		HTTPReadTimeout:  "30s",
		HTTPWriteTimeout: "60s",
		HTTPIdleTimeout:  "120s",
		HTTPMaxConns:     "4096",
	}
}

// flagSpec binds one flag to its field and environment variable; cmds
// lists the commands that read it (their -h lists it).
type flagSpec struct {
	name, env, help string
	field           *string
	cmds            string
}

const (
	cmdsAll     = "serve ingest process api"
	cmdsIngest  = "serve ingest"
	cmdsAPI     = "serve api"
	cmdsAdmin   = "serve ingest process api"
	cmdsServe   = "serve"
	cmdsProcess = "serve process"
)

func (c *config) specs() []flagSpec {
	return []flagSpec{
		{"data", "MF_DATA", "directory where the embedded log and object store keep their files", &c.Data, cmdsServe},
		{"ingest-addr", "MF_INGEST_ADDR", "listen address of the ingest and flag service (/v1)", &c.IngestAddr, cmdsIngest},
		{"api-addr", "MF_API_ADDR", "listen address of the reporting API (/api/v1)", &c.APIAddr, cmdsAPI},
		{"admin-addr", "MF_ADMIN_ADDR", "listen address of the admin API (/admin/v1, /metrics)", &c.AdminAddr, cmdsAdmin},
		{"admin-token", "MF_ADMIN_TOKEN", "bearer token for the admin API; without it only loopback callers are served", &c.AdminToken, cmdsAdmin},
		{"provision", "MF_PROVISION", "provisioning file to apply before serving", &c.Provision, cmdsAll},
		{"log", "MF_LOG", "nats://host:port[,host:port...] (or tls://...) of an external NATS JetStream cluster (default: embedded)", &c.Log, cmdsAll},
		{"log-replicas", "MF_LOG_REPLICAS", "copies of each stream the log keeps, 1 to 5; a batch is acknowledged once a majority has it (default: 3 on an external cluster, at most its size; 1 embedded)", &c.LogReplicas, cmdsAll},
		{"log-creds", "MF_LOG_CREDS", "NATS credentials file (user JWT and NKey seed) to authenticate to the --log servers", &c.LogCreds, cmdsAll},
		{"log-nkey", "MF_LOG_NKEY", "file holding a NATS NKey user seed (SU...) to authenticate to the --log servers", &c.LogNKey, cmdsAll},
		{"log-tls-ca", "MF_LOG_TLS_CA", "PEM file of the CA certificates that sign the NATS servers' certificates (turns TLS on; tls:// URLs turn it on too)", &c.LogTLSCA, cmdsAll},
		{"log-tls-cert", "MF_LOG_TLS_CERT", "PEM client certificate for NATS servers that verify their clients (with --log-tls-key)", &c.LogTLSCert, cmdsAll},
		{"log-tls-key", "MF_LOG_TLS_KEY", "PEM private key of --log-tls-cert", &c.LogTLSKey, cmdsAll},
		{"log-max-bytes", "MF_LOG_MAX_BYTES", "size cap of the log's batches stream, such as 4GiB or 500MiB; at it, batches are refused 503 until committed ones are purged (default: embedded, half the space the log may use; external, none of mf's own)", &c.LogMaxBytes, cmdsAll},
		{"log-retention", "MF_LOG_RETENTION", "how long the log keeps batches once they are committed to tables, at most 168h (7 days); the processor purges older ones", &c.LogRetention, cmdsProcess},
		{"lease-ttl", "MF_LEASE_TTL", "how long a processor's partition lease (or an ingest process's share of the rate budgets) outlives its last renewal: a process that dies hands its partitions (its share) on after this", &c.LeaseTTL, "serve ingest process"},
		{"store", "MF_STORE", "s3://[ACCESS:SECRET@]host:port/bucket?secure=false for MinIO or any S3; without keys, from AWS_ACCESS_KEY_ID/MINIO_ACCESS_KEY and the like, ~/.aws/credentials or the instance's IAM role (default: local directory)", &c.Store, cmdsAll},
		{"geoip", "MF_GEOIP", "MaxMind-format .mmdb country/region database (reloaded on SIGHUP)", &c.GeoIP, cmdsIngest},
		{"trusted-proxies", "MF_TRUSTED_PROXIES", "comma-separated CIDRs allowed to set the client address by X-Forwarded-For", &c.TrustedProxies, cmdsIngest},
		{"fsync", "MF_FSYNC", `"interval" (a 202 survives a process crash) or "always" (it also survives power loss) for the embedded log`, &c.Fsync, cmdsServe},
		{"log-level", "MF_LOG_LEVEL", "debug, info, warn or error", &c.LogLevel, cmdsAll},
		{"log-format", "MF_LOG_FORMAT", "text or json", &c.LogFormat, cmdsAll},
		{"api-cache-bytes", "MF_API_CACHE_BYTES", "memory the reporting API keeps decoded tables in, such as 512MiB or 2GiB: half for column chunks, half for day partitions (default: an eighth of the machine's memory, 128MiB to 4GiB)", &c.APICacheBytes, cmdsAPI},
		{"api-public-url", "MF_API_PUBLIC_URL", "base URL of the reporting API as clients reach it, for links (default: from each request)", &c.APIPublicURL, cmdsAPI},
		{"rate-limit-scale", "MF_RATE_LIMIT_SCALE", "multiply every /v1 rate-limit budget by this factor (e.g. 1000 for a load test)", &c.RateLimitScale, cmdsIngest},
		{"print-secrets", "MF_PRINT_SECRETS", "true: the start-up banner shows provisioned secret keys and API keys in full (for a local demo only)", &c.PrintSecrets, cmdsAll},
		{"http-read-timeout", "MF_HTTP_READ_TIMEOUT", "time each listener allows to read a whole request, headers and body; a connection that sends nothing is closed after it", &c.HTTPReadTimeout, cmdsAdmin},
		{"http-write-timeout", "MF_HTTP_WRITE_TIMEOUT", "time each listener allows to write a whole answer to a client", &c.HTTPWriteTimeout, cmdsAdmin},
		{"http-idle-timeout", "MF_HTTP_IDLE_TIMEOUT", "time a kept-alive connection may wait for its next request", &c.HTTPIdleTimeout, cmdsAdmin},
		{"http-max-conns", "MF_HTTP_MAX_CONNS", "open connections each listener keeps; at the cap it closes the oldest connection that carries no request, or answers 503", &c.HTTPMaxConns, cmdsAdmin},
		{"access-log", "MF_ACCESS_LOG", "true: log every request answered (listener, method, route pattern, status, time, bytes; never a path as asked, a query string or a client address)", &c.AccessLog, cmdsAll},
	}
}

// roleHelp says what a command that serves runs.
func roleHelp(name string) string {
	switch name {
	case "serve":
		return "Runs every role in one process: ingest, processor, reporting API and admin API."
	case "ingest":
		return "Runs the /v1 ingest and flag service only. Roles run apart share an external --log and --store."
	case "process":
		return "Runs the processor only (one process at a time holds its lease; others wait as standbys),\n" +
			"with the admin listener for /healthz and /metrics. Roles run apart share an external --log and --store."
	default:
		return "Runs the reporting API and the admin API only. Roles run apart share an external --log and --store."
	}
}

// parseConfig reads the environment, then the command line, of command
// name (serve, ingest, process or api). Every flag of the operations
// contract is accepted by every such command; -h lists those the command
// reads. It returns -1 to go on, or the exit code (help: 0, usage: 2).
func parseConfig(name string, args []string, getenv func(string) string, stdout, stderr io.Writer) (config, *flag.FlagSet, int) {
	cfg := defaultConfig()
	fs := flag.NewFlagSet("mf "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	specs := cfg.specs()
	defaults := map[string]string{}
	dc := defaultConfig()
	for _, s := range dc.specs() {
		defaults[s.name] = *s.field
	}
	for _, s := range specs {
		if v := getenv(s.env); v != "" {
			*s.field = v
		}
		if s.name == "print-secrets" || s.name == "access-log" {
			fs.Var(boolString{s.field}, s.name, s.help+" (env "+s.env+")")
			continue
		}
		fs.StringVar(s.field, s.name, *s.field, s.help+" (env "+s.env+")")
	}
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "usage: mf %s [flags]\n\n%s\n\nflags (each also read from the environment variable shown):\n", name, roleHelp(name))
		for _, s := range specs {
			if !slices.Contains(strings.Fields(s.cmds), name) {
				continue
			}
			def := ""
			if d := defaults[s.name]; d != "" {
				def = " (default " + d + ")"
			}
			fmt.Fprintf(w, "  --%s\n        %s\n        env %s%s\n", s.name, s.help, s.env, def)
		}
	}
	if code := parseArgs(fs, args, stdout, stderr); code >= 0 {
		return cfg, fs, code
	}
	cfg.adminAddrSet = getenv("MF_ADMIN_ADDR") != ""
	fs.Visit(func(f *flag.Flag) { cfg.adminAddrSet = cfg.adminAddrSet || f.Name == "admin-addr" })
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "mf %s: unexpected arguments %q\n", name, fs.Args())
		return cfg, fs, 2
	}
	if err := cfg.validate(); err != nil {
		fmt.Fprintf(stderr, "mf %s: %v\n", name, err)
		return cfg, fs, 2
	}
	return cfg, fs, -1
}

// boolString is a flag given alone (--print-secrets) or with a value
// (--print-secrets=false), kept as "true" or "false".
type boolString struct{ p *string }

func (b boolString) String() string {
	if b.p == nil {
		return ""
	}
	return *b.p
}

func (b boolString) Set(v string) error {
	x, err := strconv.ParseBool(v)
	if err != nil {
		return err
	}
	*b.p = strconv.FormatBool(x)
	return nil
}

func (b boolString) IsBoolFlag() bool { return true }

// unread lists the flags set on the command line that command name does
// not read (accepted, since the roles take the same flags, but ignored).
func unread(name string, fs *flag.FlagSet, specs []flagSpec) []string {
	var out []string
	fs.Visit(func(f *flag.Flag) {
		for _, s := range specs {
			if s.name == f.Name && !slices.Contains(strings.Fields(s.cmds), name) {
				out = append(out, "--"+f.Name)
			}
		}
	})
	return out
}

func (c config) validate() error {
	var errs []error
	if c.Data == "" && (c.Log == "" || c.Store == "") {
		errs = append(errs, errors.New("--data must not be empty while the log or the store is embedded"))
	}
	if c.Log != "" && !strings.HasPrefix(c.Log, "nats://") && !strings.HasPrefix(c.Log, "tls://") {
		errs = append(errs, fmt.Errorf("--log %q: want nats://host:port[,host:port...] or tls://host:port[,...]", redactLogURL(c.Log)))
	}
	if c.Log == "" && (c.LogCreds != "" || c.LogNKey != "" || c.LogTLSCA != "" || c.LogTLSCert != "" || c.LogTLSKey != "") {
		errs = append(errs, errors.New("--log-creds, --log-nkey and --log-tls-* apply to an external --log only"))
	}
	if c.LogCreds != "" && c.LogNKey != "" {
		errs = append(errs, errors.New("--log-creds and --log-nkey: give one way to authenticate to NATS"))
	}
	if (c.LogTLSCert == "") != (c.LogTLSKey == "") {
		errs = append(errs, errors.New("--log-tls-cert and --log-tls-key go together"))
	}
	for _, f := range []struct{ flag, path string }{{"--log-creds", c.LogCreds}, {"--log-nkey", c.LogNKey},
		{"--log-tls-ca", c.LogTLSCA}, {"--log-tls-cert", c.LogTLSCert}, {"--log-tls-key", c.LogTLSKey}} {
		if f.path != "" {
			if _, err := os.Stat(f.path); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", f.flag, err))
			}
		}
	}
	for _, d := range []struct{ flag, v string }{{"--http-read-timeout", c.HTTPReadTimeout}, {"--http-write-timeout", c.HTTPWriteTimeout},
		{"--http-idle-timeout", c.HTTPIdleTimeout}} {
		if v, err := time.ParseDuration(d.v); err != nil || v <= 0 {
			errs = append(errs, fmt.Errorf("%s %q: want a positive duration such as 30s", d.flag, d.v))
		}
	}
	if c.LogMaxBytes != "" {
		if n, err := parseByteSize(c.LogMaxBytes); err != nil || n < 1<<20 {
			errs = append(errs, fmt.Errorf("--log-max-bytes %q: want a size of at least 1MiB, such as 4GiB or 4294967296", c.LogMaxBytes))
		}
	}
	if v, err := time.ParseDuration(c.LogRetention); err != nil || v < time.Second || v > 7*24*time.Hour {
		errs = append(errs, fmt.Errorf("--log-retention %q: want a duration from 1s to 168h (7 days), such as 144h", c.LogRetention))
	}
	if v, err := time.ParseDuration(c.LeaseTTL); err != nil || v < 3*time.Second {
		errs = append(errs, fmt.Errorf("--lease-ttl %q: want a duration of at least 3s, such as 15s", c.LeaseTTL))
	}
	if c.APICacheBytes != "" {
		if _, err := parseByteSize(c.APICacheBytes); err != nil {
			errs = append(errs, fmt.Errorf("--api-cache-bytes: %w", err))
		}
	}
	if n, err := strconv.Atoi(c.HTTPMaxConns); err != nil || n < 16 {
		errs = append(errs, fmt.Errorf("--http-max-conns %q: want a number of at least 16", c.HTTPMaxConns))
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
	if _, err := strconv.ParseBool(c.PrintSecrets); err != nil {
		errs = append(errs, fmt.Errorf("--print-secrets %q: want true or false", c.PrintSecrets))
	}
	if c.LogReplicas != "" {
		n, err := strconv.Atoi(c.LogReplicas)
		switch {
		case err != nil || n < 1 || n > 5:
			errs = append(errs, fmt.Errorf("--log-replicas %q: want a number from 1 to 5", c.LogReplicas))
		case n > 1 && c.Log == "":
			errs = append(errs, fmt.Errorf("--log-replicas %d needs an external --log cluster: the embedded log keeps 1 copy", n))
		}
	}
	if _, err := strconv.ParseBool(c.AccessLog); err != nil {
		errs = append(errs, fmt.Errorf("--access-log %q: want true or false", c.AccessLog))
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

// logReplicas is --log-replicas as a number, 0 when not given (the log
// chooses: 1 embedded, 3 on a cluster, at most as many as its servers).
func (c config) logReplicas() int {
	n, _ := strconv.Atoi(c.LogReplicas)
	return n
}

// redactLogURL hides user names and passwords of a --log value.
func redactLogURL(raw string) string {
	var parts []string
	for _, part := range strings.Split(raw, ",") {
		start := 0
		if i := strings.Index(part, "://"); i >= 0 {
			start = i + len("://")
		}
		if at := strings.LastIndex(part, "@"); at >= start {
			part = part[:start] + "xxxxx" + part[at:]
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, ",")
}

// listenerLimits are the --http-* settings, parsed (validate checked them).
type listenerLimits struct {
	read, write, idle time.Duration
	maxConns          int
}

func (c config) listenerLimits() listenerLimits {
	var l listenerLimits
	l.read, _ = time.ParseDuration(c.HTTPReadTimeout)
	l.write, _ = time.ParseDuration(c.HTTPWriteTimeout)
	l.idle, _ = time.ParseDuration(c.HTTPIdleTimeout)
	l.maxConns, _ = strconv.Atoi(c.HTTPMaxConns)
	return l
}

// logMaxBytes is --log-max-bytes in bytes, 0 when not given (the log
// chooses).
func (c config) logMaxBytes() int64 {
	n, _ := parseByteSize(c.LogMaxBytes)
	return n
}

// logRetention is --log-retention, parsed.
func (c config) logRetention() time.Duration {
	d, _ := time.ParseDuration(c.LogRetention)
	return d
}

// leaseTTL is --lease-ttl, parsed.
func (c config) leaseTTL() time.Duration {
	d, _ := time.ParseDuration(c.LeaseTTL)
	return d
}

// storeName names the object store in messages, without its keys.
func storeName(c config) string {
	if c.Store == "" {
		return "local directory " + filepath.Join(c.Data, "objects")
	}
	if u, err := url.Parse(c.Store); err == nil {
		u.User = nil
		return u.String()
	}
	return "given by --store"
}
