package eventlog

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
)

// securityOptions are the connection options of an external server's
// authentication and TLS (Config.CredsFile, NKeyFile, TLS*File). A user
// and password in the URL need none. docs/deploy.md, "Securing the log".
func securityOptions(cfg Config) ([]nats.Option, error) {
	var opts []nats.Option
	switch {
	case cfg.CredsFile != "":
		opts = append(opts, nats.UserCredentials(cfg.CredsFile))
	case cfg.NKeyFile != "":
		opt, err := nats.NkeyOptionFromSeed(cfg.NKeyFile)
		if err != nil {
			// The error names the file, never the seed.
			return nil, fmt.Errorf("log config: cannot read the NKey seed file %s: %w", cfg.NKeyFile, err)
		}
		opts = append(opts, opt)
	}
	if cfg.TLSCAFile != "" {
		opts = append(opts, nats.RootCAs(cfg.TLSCAFile))
	}
	if cfg.TLSCertFile != "" {
		opts = append(opts, nats.ClientCert(cfg.TLSCertFile, cfg.TLSKeyFile))
	}
	if cfg.TLSCAFile != "" || cfg.TLSCertFile != "" || strings.Contains(cfg.URL, "tls://") {
		opts = append(opts, nats.Secure())
	}
	return opts, nil
}

// refused reports whether a connection failed for a reason retrying
// cannot mend: the server refused the credentials, or a certificate
// (the server's, or the files given) does not verify or load.
func refused(err error) bool {
	var cv *tls.CertificateVerificationError
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	return errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) || errors.Is(err, nats.ErrAuthRevoked) ||
		errors.As(err, &cv) || errors.As(err, &ua) || errors.As(err, &hn) ||
		errors.Is(err, nats.ErrSecureConnRequired) || errors.Is(err, nats.ErrSecureConnWanted) || errors.Is(err, nats.ErrNkeysNotSupported) ||
		strings.Contains(err.Error(), "nats: error loading")
}
