package enrich

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"time"
)

// Sentinel errors of the package; test with errors.Is.
var (
	// ErrNoAddress: the request carries no usable peer address, so there
	// is no client network to limit or hash.
	ErrNoAddress = errors.New("no client address")
	// ErrNoProject: a visitor hash was asked for without a project id to
	// scope it.
	ErrNoProject = errors.New("no project id to scope the visitor hash")
	// ErrInvalidDay: a salt day key is not a UTC date "2006-01-02".
	ErrInvalidDay = errors.New("invalid salt day key")
	// ErrCorruptSalt: a stored salt is not SaltSize bytes.
	ErrCorruptSalt = errors.New("stored visitor salt is corrupt")
	// ErrNoGeoIP: ReloadGeoIP was called without a GeoIP database
	// configured.
	ErrNoGeoIP = errors.New("no GeoIP database configured")
)

// Config configures an Enricher.
type Config struct {
	// TrustedProxies are the networks of reverse proxies in front of mf
	// (contract flag --trusted-proxies, parsed by ParseTrustedProxies).
	// Only a request whose peer is in one of them may name the client by
	// X-Forwarded-For. Empty (the default): the header is ignored and the
	// peer is the client.
	TrustedProxies []netip.Prefix
	// GeoIPFile is the path of a MaxMind-format database (--geoip): a
	// GeoLite2/GeoIP2 Country or City database, or DB-IP's Lite
	// country or city database in MMDB format. Empty (the default):
	// country and region stay empty.
	GeoIPFile string
	// UserAgentCacheSize bounds how many distinct User-Agent strings keep
	// their classification in memory (about 100 bytes each). Default
	// 16384; at least 64.
	UserAgentCacheSize int
}

// DefaultConfig returns the defaults: no trusted proxies, no GeoIP
// database, a User-Agent cache of 16384 entries.
func DefaultConfig() Config {
	return Config{UserAgentCacheSize: 16384}
}

// Validate reports what is wrong with c, in terms of the flags that set it.
func (c Config) Validate() error {
	var errs []error
	for _, p := range c.TrustedProxies {
		if !p.IsValid() {
			errs = append(errs, fmt.Errorf("trusted proxy network %v is not valid; give networks like 10.0.0.0/8 in --trusted-proxies", p))
		}
	}
	if c.UserAgentCacheSize < 64 {
		errs = append(errs, fmt.Errorf("User-Agent cache size %d is below 64; raise it (default 16384)", c.UserAgentCacheSize))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("invalid enrichment config: %w", err)
	}
	return nil
}

// RequestFacts are the parts of an HTTP request that enrichment reads.
// Handlers fill it from their framework's request.
type RequestFacts struct {
	// Peer is the address of the connection's remote end.
	Peer netip.Addr
	// XForwardedFor is the value of the X-Forwarded-For header; when the
	// request carries several such headers, their values joined with ","
	// in the order received. Empty when absent.
	XForwardedFor string
	// UserAgent is the value of the User-Agent header, empty when absent.
	UserAgent string
}

// Source says what the request is for.
type Source struct {
	// ProjectID scopes the visitor hash: one visitor hashes differently in
	// two projects. Required when Website and Consentless are both true.
	ProjectID string
	// Website: the batch came with a website key. Device, browser, OS,
	// bot and location are derived for website sources only.
	Website bool
	// Consentless: the batch is stored in consentless mode (the source's
	// mode, or a full batch downgraded by Sec-GPC or DNT). With Website, a
	// visitor hash is computed.
	Consentless bool
}

// Edge is what enrichment derives from a request. It holds no raw address.
type Edge struct {
	// Country is the ISO 3166-1 alpha-2 code in upper case ("DE"), empty
	// if unknown or for a server source.
	Country string
	// Region is the ISO 3166-2 subdivision code including the country
	// ("US-CA", "DE-BY"), empty if unknown.
	Region string
	// Device is desktop, mobile, tablet, or empty if unknown.
	Device string
	// Browser is the browser family ("Chrome", "Samsung Internet"), Other
	// for one mf does not report by name, or empty if unknown.
	Browser string
	// OS is the operating system family ("Windows", "iOS"), Other, or
	// empty if unknown.
	OS string
	// Bot: the User-Agent of a website request is a bot's (or empty). The
	// batch is then refused with reason "bot" and the fields above and
	// VisitorHash are left empty.
	Bot bool
	// VisitorHash is the consentless daily visitor hash, VisitorHashLen
	// hex digits; empty unless the source is a website and consentless.
	VisitorHash string
	// NetKey is the client network for rate limiting (never to be logged
	// or stored; it prints as a placeholder).
	NetKey NetKey
}

// LogValue logs an Edge without its NetKey.
func (e Edge) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("country", e.Country),
		slog.String("region", e.Region),
		slog.String("device", e.Device),
		slog.String("browser", e.Browser),
		slog.String("os", e.OS),
		slog.Bool("bot", e.Bot),
		slog.Bool("visitor_hash", e.VisitorHash != ""),
	)
}

// Enricher derives Edge facts from requests. It is safe for concurrent use.
type Enricher struct {
	proxies proxies
	ua      *uaClassifier
	geo     *geoDB // nil without a database
	salts   dailySalts
	logger  *slog.Logger
}

// New returns an Enricher. It opens the GeoIP database if cfg names one;
// salts is where the daily visitor salts are shared between processes.
func New(cfg Config, salts SaltStore, logger *slog.Logger) (*Enricher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if salts == nil {
		return nil, errors.New("cannot create enricher: no salt store given")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	e := &Enricher{
		proxies: normalPrefixes(cfg.TrustedProxies),
		ua:      newUAClassifier(cfg.UserAgentCacheSize),
		salts:   dailySalts{store: salts},
		logger:  logger,
	}
	if cfg.GeoIPFile != "" {
		g, err := openGeoDB(cfg.GeoIPFile, logger)
		if err != nil {
			return nil, err
		}
		e.geo = g
	}
	return e, nil
}

func normalPrefixes(ps []netip.Prefix) proxies {
	out := make(proxies, 0, len(ps))
	for _, p := range ps {
		if p.Addr().Is4In6() {
			p = netip.PrefixFrom(p.Addr().Unmap(), max(p.Bits()-96, 0))
		}
		out = append(out, p.Masked())
	}
	return out
}

// NetKey returns the client network of r for rate limiting, for limits
// that apply before the source is known.
func (e *Enricher) NetKey(r RequestFacts) (NetKey, error) {
	if !r.Peer.IsValid() {
		return NetKey{}, ErrNoAddress
	}
	return netKeyOf(e.proxies.clientAddr(r.Peer, r.XForwardedFor)), nil
}

// Enrich derives the Edge facts of request r for source src at time now.
// A server source gets only its NetKey. A website source gets device,
// browser, OS, bot verdict, country and region, and when consentless the
// visitor hash of now's UTC day; a bot gets nothing more than Bot and
// NetKey. It fails with ErrNoAddress without a peer address, with
// ErrNoProject for a consentless website source without a project, and
// when the day's salt cannot be had from the SaltStore.
func (e *Enricher) Enrich(ctx context.Context, r RequestFacts, src Source, now time.Time) (Edge, error) {
	if !r.Peer.IsValid() {
		return Edge{}, ErrNoAddress
	}
	client := e.proxies.clientAddr(r.Peer, r.XForwardedFor)
	out := Edge{NetKey: netKeyOf(client)}
	if !src.Website {
		return out, nil
	}
	info := e.ua.classify(r.UserAgent)
	if info.Bot {
		out.Bot = true
		return out, nil
	}
	out.Device, out.Browser, out.OS = info.Device, info.Browser, info.OS
	if e.geo != nil {
		out.Country, out.Region = e.geo.lookup(client)
	}
	if src.Consentless {
		if src.ProjectID == "" {
			return Edge{}, ErrNoProject
		}
		s, err := e.salts.get(ctx, now)
		if err != nil {
			return Edge{}, fmt.Errorf("cannot compute visitor hash: %w", err)
		}
		out.VisitorHash = visitorHash(&s.salt, src.ProjectID, out.NetKey, r.UserAgent)
	}
	return out, nil
}

// IsBot reports whether a User-Agent belongs to a bot (or is empty), from
// the same cache Enrich uses.
func (e *Enricher) IsBot(userAgent string) bool { return e.ua.classify(userAgent).Bot }

// RotateSalts makes sure the visitor salts of now's UTC day and of the next
// day exist in the SaltStore and are cached, and deletes older salts from
// memory and from the store. Run it at start and periodically (RunSalts
// does), so that midnight needs no store round trip and no salt outlives
// its day by more than one period.
func (e *Enricher) RotateSalts(ctx context.Context, now time.Time) error {
	return e.salts.rotate(ctx, now)
}

// RunSalts calls RotateSalts with clock() now and then every period until
// ctx ends; failures are logged and retried at the next period. It returns
// when ctx is done.
func (e *Enricher) RunSalts(ctx context.Context, period time.Duration, clock func() time.Time) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		if err := e.RotateSalts(ctx, clock()); err != nil && ctx.Err() == nil {
			e.logger.Warn("visitor salt rotation failed; retrying next period", "err", err, "period", period)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// ReloadGeoIP reads the GeoIP database file again (after it was replaced
// on disk) and uses it from now on; lookups in progress finish on the old
// one. On failure the old one stays in use.
func (e *Enricher) ReloadGeoIP() error {
	if e.geo == nil {
		return ErrNoGeoIP
	}
	return e.geo.reload()
}

// Close drops the GeoIP database (lookups still running finish on it; its
// memory goes with the last of them) and forgets the cached salts. Enrich
// still works after Close, without location.
func (e *Enricher) Close() error {
	if e.geo != nil {
		e.geo.cur.Store(nil)
	}
	e.salts.today.Store(nil)
	e.salts.next.Store(nil)
	return nil
}
