package ingest

// Key formats of the specification's Authentication section: `mf_`, eight
// lower-case letters or digits, `_`, then one or more letters, digits, `_`
// or `-`. Keys with the legacy prefix `svc_` (the specification's neutral
// stand-in for the older brand prefix) and the same remainder are still
// accepted (RATIONALE.md, "Legacy key prefix").

// looksLikeKey reports whether s has the form of a source key.
func looksLikeKey(s string) bool {
	var rest string
	switch {
	case len(s) > 3 && s[:3] == "mf_":
		rest = s[3:]
	case len(s) > 4 && s[:4] == "svc_":
		rest = s[4:]
	default:
		return false
	}
	if len(rest) < 10 || rest[8] != '_' {
		return false
	}
	for i := 0; i < 8; i++ {
		c := rest[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	for i := 9; i < len(rest); i++ {
		c := rest[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// bearerToken returns the credential of an `Authorization: Bearer <token>`
// header; the scheme name is case-insensitive.
func bearerToken(h string) (string, bool) {
	const scheme = "bearer "
	if len(h) <= len(scheme) {
		return "", false
	}
	for i := 0; i < len(scheme); i++ {
		c := h[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != scheme[i] {
			return "", false
		}
	}
	tok := h[len(scheme):]
	for len(tok) > 0 && (tok[0] == ' ' || tok[0] == '\t') {
		tok = tok[1:]
	}
	for len(tok) > 0 && (tok[len(tok)-1] == ' ' || tok[len(tok)-1] == '\t') {
		tok = tok[:len(tok)-1]
	}
	return tok, tok != ""
}
