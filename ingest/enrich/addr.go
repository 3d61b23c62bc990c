package enrich

import (
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
)

// NetKey identifies a client network for rate limiting: the IPv4 address,
// or the /64 network of an IPv6 address (one subscriber's LAN). It is
// comparable, so it can key a map directly, and it prints as a placeholder
// (String, LogValue) so that it cannot reach a log by accident. Key gives
// the compact form a limiter keyed by strings needs.
//
// A NetKey stays in memory: never write it to the log or storage.
type NetKey struct {
	p netip.Prefix
}

// IsValid reports whether k names a network (the zero NetKey does not).
func (k NetKey) IsValid() bool { return k.p.IsValid() }

// Prefix returns the network: a /32 for IPv4, a /64 for IPv6.
func (k NetKey) Prefix() netip.Prefix { return k.p }

// Key returns a compact binary string for keying a limiter: the family
// byte '4' and 4 address bytes, or '6' and the 8 bytes of the /64. The
// zero NetKey gives "".
func (k NetKey) Key() string {
	var buf [9]byte
	return string(k.AppendKey(buf[:0]))
}

// AppendKey appends the bytes of Key to b, so that a caller can look up a
// map[string]... with m[string(k.AppendKey(buf[:0]))] without allocating.
func (k NetKey) AppendKey(b []byte) []byte {
	if !k.p.IsValid() {
		return b
	}
	a := k.p.Addr()
	if a.Is4() {
		a4 := a.As4()
		return append(append(b, '4'), a4[:]...)
	}
	a16 := a.As16()
	return append(append(b, '6'), a16[:8]...)
}

// String hides the network: NetKey values must not reach logs.
func (k NetKey) String() string {
	if !k.p.IsValid() {
		return "netkey(none)"
	}
	if k.p.Addr().Is4() {
		return "netkey(ipv4)"
	}
	return "netkey(ipv6/64)"
}

// GoString hides the network from %#v.
func (k NetKey) GoString() string { return k.String() }

// LogValue hides the network from slog.
func (k NetKey) LogValue() slog.Value { return slog.StringValue(k.String()) }

// netKeyOf gives the network of a (already unmapped, without zone).
func netKeyOf(a netip.Addr) NetKey {
	if a.Is4() {
		return NetKey{netip.PrefixFrom(a, 32)}
	}
	p, _ := a.Prefix(64) // cannot fail: 64 is within 0..128 for IPv6
	return NetKey{p}
}

// ParseTrustedProxies parses the value of --trusted-proxies: networks in
// CIDR notation or single addresses, separated by commas or white space
// ("10.0.0.0/8, 192.0.2.7, 2001:db8::/32"). An empty value gives none.
func ParseTrustedProxies(s string) ([]netip.Prefix, error) {
	fields := strings.FieldsFunc(s, func(r rune) bool {
		return r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '\r'
	})
	out := make([]netip.Prefix, 0, len(fields))
	for _, f := range fields {
		p, err := parsePrefixOrAddr(f)
		if err != nil {
			return nil, fmt.Errorf("cannot parse trusted proxy %q: %w; give networks like 10.0.0.0/8 or addresses like 192.0.2.7, separated by commas", f, err)
		}
		out = append(out, p)
	}
	return out, nil
}

func parsePrefixOrAddr(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, err
		}
		if p.Addr().Is4In6() {
			p = netip.PrefixFrom(p.Addr().Unmap(), max(p.Bits()-96, 0))
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	if a.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("address has a zone")
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// proxies is the set of trusted proxy networks.
type proxies []netip.Prefix

func (ps proxies) contains(a netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// clientAddr resolves the client's address. Without a trusted peer it is
// the peer. When the peer is a trusted proxy, X-Forwarded-For is walked
// from its right end (the entry the nearest proxy added) leftwards for as
// long as the address reached is a trusted proxy; the first address that
// is not trusted is the client. An entry that is not an address stops the
// walk and the last trusted proxy reached stands as the client, since
// nothing left of a broken entry can be believed. If every entry is
// trusted, the leftmost one is the client.
func (ps proxies) clientAddr(peer netip.Addr, xff string) netip.Addr {
	addr := normalAddr(peer)
	if len(ps) == 0 || xff == "" {
		return addr
	}
	rest := xff
	for ps.contains(addr) {
		if rest == "" {
			break
		}
		var entry string
		if i := strings.LastIndexByte(rest, ','); i >= 0 {
			entry, rest = rest[i+1:], rest[:i]
		} else {
			entry, rest = rest, ""
		}
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue // "a, , b" or a trailing comma: no hop there
		}
		next, ok := parseForwarded(entry)
		if !ok {
			break
		}
		addr = next
	}
	return addr
}

// parseForwarded parses one X-Forwarded-For entry: an address, optionally
// with a port ("192.0.2.1:4711", "[2001:db8::1]:4711") or in brackets.
func parseForwarded(s string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(s); err == nil {
		return normalAddr(a), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return normalAddr(ap.Addr()), true
	}
	if len(s) > 2 && s[0] == '[' && s[len(s)-1] == ']' {
		if a, err := netip.ParseAddr(s[1 : len(s)-1]); err == nil {
			return normalAddr(a), true
		}
	}
	return netip.Addr{}, false
}

// normalAddr unmaps IPv4-mapped IPv6 addresses and drops zones, so that
// one client has one form.
func normalAddr(a netip.Addr) netip.Addr {
	return a.Unmap().WithZone("")
}
