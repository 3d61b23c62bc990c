package ingest

import "testing"

func TestLooksLikeKey(t *testing.T) {
	for s, want := range map[string]bool{
		"mf_abcd1234_Xy-9":       true,
		"mf_abcd1234_x":          true,
		"mf_abcd1234_":           false,
		"mf_ABCD1234_x":          false,
		"mf_abcd123_x":           false,
		"mf_abcd12345_x":         false,
		"mf_abcd1234_x.y":        false,
		"svc_abcd1234_Zq_1":      true,
		"sk_abcd1234_x":          false,
		"batch":                  false,
		"":                       false,
		"mf_pat_abcd1234_" + "x": false,
	} {
		if got := looksLikeKey(s); got != want {
			t.Errorf("looksLikeKey(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestBearerToken(t *testing.T) {
	for h, want := range map[string]string{
		"Bearer mf_abcd1234_x":   "mf_abcd1234_x",
		"bearer mf_abcd1234_x":   "mf_abcd1234_x",
		"BEARER  mf_abcd1234_x ": "mf_abcd1234_x",
		"Basic abc":              "",
		"Bearer ":                "",
		"Bearermf_abcd1234_x":    "",
		"":                       "",
	} {
		got, ok := bearerToken(h)
		if got != want || ok != (want != "") {
			t.Errorf("bearerToken(%q) = %q,%v, want %q", h, got, ok, want)
		}
	}
}

func TestOriginAllowed(t *testing.T) {
	allowed := []string{"https://shop.example", "http://app.test:8443"}
	for o, want := range map[string]bool{
		"https://shop.example":          true,
		"https://shop.example:443":      true,
		"https://www.shop.example":      true,
		"https://WWW.Shop.Example":      true,
		"http://shop.example":           false,
		"https://shop.example:8443":     false,
		"https://evil.example":          false,
		"https://www.evil.shop.example": false,
		"http://app.test:8443":          true,
		"http://www.app.test:8443":      true,
		"http://app.test":               false,
		"http://localhost:3000":         true,
		"https://localhost":             true,
		"http://127.0.0.1:9999":         true,
		"null":                          false,
		"":                              false,
	} {
		if got := originAllowed(o, allowed); got != want {
			t.Errorf("originAllowed(%q) = %v, want %v", o, got, want)
		}
	}
	if !originAllowed("https://anything.example", nil) {
		t.Error("empty allow-list must accept every origin")
	}
	// The twin rule works from either side.
	if !originAllowed("https://shop.example", []string{"https://www.shop.example"}) {
		t.Error("apex of an allowed www origin refused")
	}
}
