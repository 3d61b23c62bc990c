package enrich

import (
	"net/netip"
	"strings"
	"testing"
)

// FuzzTrustedProxies feeds arbitrary --trusted-proxies values to
// ParseTrustedProxies. Seeds: testdata/trusted_proxies.tsv and
// testdata/fuzz/FuzzTrustedProxies. Properties: a refusal says how to
// write the value; accepted networks are valid, masked, without zones and
// without IPv4-mapped IPv6 forms, and written back (comma-separated)
// parse to the same networks.
func FuzzTrustedProxies(f *testing.F) {
	for _, c := range readTSV(f, "trusted_proxies.tsv", 2) {
		f.Add(c[0])
	}
	f.Fuzz(func(t *testing.T, s string) {
		ps, err := ParseTrustedProxies(s)
		if err != nil {
			if !strings.Contains(err.Error(), "networks like") {
				t.Fatalf("refusal %q does not say how to write the value", err)
			}
			return
		}
		var back []string
		for _, p := range ps {
			if !p.IsValid() || p != p.Masked() || p.Addr().Zone() != "" || p.Addr().Is4In6() {
				t.Fatalf("%q gives network %v", s, p)
			}
			back = append(back, p.String())
		}
		again, err := ParseTrustedProxies(strings.Join(back, ","))
		if err != nil || len(again) != len(ps) {
			t.Fatalf("%q written back as %q: %v %v", s, back, again, err)
		}
		for i := range ps {
			if again[i] != ps[i] {
				t.Fatalf("%v written back reads %v", ps[i], again[i])
			}
		}
	})
}

// FuzzClientAddr feeds arbitrary trusted proxies, peers and
// X-Forwarded-For values to the client address resolution. Seeds:
// testdata/client_address.tsv and testdata/fuzz/FuzzClientAddr.
// Properties:
//   - the client is a valid address in one form (no zone, IPv4 not
//     mapped), and is the peer when the peer is not a trusted proxy;
//   - the client is the peer or an address written in X-Forwarded-For;
//   - what a client writes cannot move its address: once the client
//     reached is not a trusted proxy, anything put in front of the
//     header (the client's own X-Forwarded-For) leaves it unchanged;
//   - the rate-limit network of the client is its /32 or /64.
func FuzzClientAddr(f *testing.F) {
	for _, c := range readTSV(f, "client_address.tsv", 5) {
		f.Add(c[0], c[1], c[2], "203.0.113.9")
	}
	f.Fuzz(func(t *testing.T, trusted, peer, xff, spoof string) {
		list, err := ParseTrustedProxies(trusted)
		if err != nil {
			return
		}
		pa, err := netip.ParseAddr(peer)
		if err != nil {
			return
		}
		ps := proxies(list)
		got := ps.clientAddr(pa, xff)
		if !got.IsValid() || got.Zone() != "" || got.Is4In6() {
			t.Fatalf("client %v", got)
		}
		np := normalAddr(pa)
		if !ps.contains(np) && got != np {
			t.Fatalf("peer %v is no trusted proxy, yet the client is %v", np, got)
		}
		if got != np {
			found := false
			for _, e := range strings.Split(xff, ",") {
				if a, ok := parseForwarded(strings.TrimSpace(e)); ok && a == got {
					found = true
				}
			}
			if !found {
				t.Fatalf("client %v is neither the peer %v nor in %q", got, np, xff)
			}
		}
		if !ps.contains(got) {
			if again := ps.clientAddr(pa, spoof+","+xff); again != got {
				t.Fatalf("client %v becomes %v when the request writes %q in front of %q", got, again, spoof, xff)
			}
		}
		k := netKeyOf(got)
		if bits := k.Prefix().Bits(); !k.Prefix().Contains(got) || (got.Is4() && bits != 32) || (got.Is6() && bits != 64) {
			t.Fatalf("network %v of %v", k.Prefix(), got)
		}
	})
}
