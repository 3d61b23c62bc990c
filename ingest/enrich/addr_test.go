package enrich

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
)

func TestClientAddress(t *testing.T) {
	for _, c := range readTSV(t, "client_address.tsv", 5) {
		trusted, peer, xff, wantClient, wantNet := c[0], c[1], c[2], c[3], c[4]
		name := fmt.Sprintf("trusted=%q/peer=%s/xff=%q", trusted, peer, xff)
		t.Run(name, func(t *testing.T) {
			ps, err := ParseTrustedProxies(trusted)
			if err != nil {
				t.Fatalf("ParseTrustedProxies: %v", err)
			}
			cfg := DefaultConfig()
			cfg.TrustedProxies = ps
			e := newEnricher(t, cfg)
			r := RequestFacts{Peer: netip.MustParseAddr(peer), XForwardedFor: xff}

			if got := e.proxies.clientAddr(r.Peer, r.XForwardedFor); got != netip.MustParseAddr(wantClient) {
				t.Errorf("client = %v, want %s", got, wantClient)
			}
			nk, err := e.NetKey(r)
			if err != nil {
				t.Fatalf("NetKey: %v", err)
			}
			if got := nk.Prefix(); got != netip.MustParsePrefix(wantNet) {
				t.Errorf("NetKey = %v, want %s", got, wantNet)
			}
			edge, err := e.Enrich(t.Context(), r, Source{ProjectID: "p", Website: true}, fixedNow)
			if err != nil {
				t.Fatalf("Enrich: %v", err)
			}
			if edge.NetKey != nk {
				t.Errorf("Enrich NetKey %v differs from NetKey %v", edge.NetKey.Prefix(), nk.Prefix())
			}
		})
	}
}

func TestParseTrustedProxies(t *testing.T) {
	for _, c := range readTSV(t, "trusted_proxies.tsv", 2) {
		in, want := c[0], c[1]
		t.Run(in, func(t *testing.T) {
			got, err := ParseTrustedProxies(in)
			if want == "error" {
				if err == nil {
					t.Fatalf("ParseTrustedProxies(%q) = %v, want an error", in, got)
				}
				if !strings.Contains(err.Error(), "--trusted-proxies") && !strings.Contains(err.Error(), "networks like") {
					t.Errorf("error %q does not say how to fix the value", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseTrustedProxies(%q): %v", in, err)
			}
			var s []string
			for _, p := range got {
				s = append(s, p.String())
			}
			if g := strings.Join(s, " "); g != want {
				t.Errorf("ParseTrustedProxies(%q) = %q, want %q", in, g, want)
			}
		})
	}
}

func TestNetKeyKey(t *testing.T) {
	v4 := netKeyOf(netip.MustParseAddr("203.0.113.7"))
	if got, want := v4.Key(), "4\xcb\x00\x71\x07"; got != want {
		t.Errorf("IPv4 Key = %q, want %q", got, want)
	}
	v6a := netKeyOf(netip.MustParseAddr("2001:db8:1:2:3:4:5:6"))
	v6b := netKeyOf(netip.MustParseAddr("2001:db8:1:2:ffff::1"))
	v6c := netKeyOf(netip.MustParseAddr("2001:db8:1:3::1"))
	if got, want := v6a.Key(), "6\x20\x01\x0d\xb8\x00\x01\x00\x02"; got != want {
		t.Errorf("IPv6 Key = %q, want %q", got, want)
	}
	if v6a != v6b || v6a.Key() != v6b.Key() {
		t.Errorf("two addresses of one /64 have different keys")
	}
	if v6a == v6c || v6a.Key() == v6c.Key() {
		t.Errorf("two /64 networks share a key")
	}
	if (NetKey{}).Key() != "" || (NetKey{}).IsValid() {
		t.Errorf("zero NetKey is valid or has a key")
	}
}

// TestNetKeyHidesAddress checks that a NetKey or an Edge printed or logged
// by accident does not show the client address.
func TestNetKeyHidesAddress(t *testing.T) {
	e := newEnricher(t, DefaultConfig())
	for _, addr := range []string{"203.0.113.7", "2001:db8:1:2:3:4:5:6"} {
		edge, err := e.Enrich(t.Context(), RequestFacts{Peer: netip.MustParseAddr(addr), UserAgent: "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:125.0) Gecko/20100101 Firefox/125.0"},
			Source{ProjectID: "p", Website: true, Consentless: true}, fixedNow)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		log := slog.New(slog.NewJSONHandler(&buf, nil))
		log.Info("edge", "edge", edge, "netkey", edge.NetKey)
		fmt.Fprintf(&buf, "%v %+v %s %#v %#v", edge.NetKey, edge, edge.NetKey, edge, edge.NetKey)
		out := buf.String()
		for _, leak := range []string{addr, "203.0.113", "2001:db8", "cb007107"} {
			if strings.Contains(out, leak) {
				t.Errorf("printed Edge shows %q: %s", leak, out)
			}
		}
		if !strings.Contains(out, "netkey(ipv") {
			t.Errorf("printed NetKey lacks its placeholder: %s", out)
		}
	}
}

func TestNoAddress(t *testing.T) {
	e := newEnricher(t, DefaultConfig())
	if _, err := e.NetKey(RequestFacts{XForwardedFor: "198.51.100.1"}); !errors.Is(err, ErrNoAddress) {
		t.Errorf("NetKey without peer: err = %v, want ErrNoAddress", err)
	}
	if _, err := e.Enrich(t.Context(), RequestFacts{UserAgent: "x"}, Source{Website: true}, fixedNow); !errors.Is(err, ErrNoAddress) {
		t.Errorf("Enrich without peer: err = %v, want ErrNoAddress", err)
	}
}
