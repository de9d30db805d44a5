// Package auth says who makes a request, from the credentials it carries:
// an API key (`--auth keys`) or a JSON Web Token (`--auth jwt`), or nobody
// in particular (`--auth none`, every request the anonymous principal's).
// Its Authenticator is what internal/identity's middleware asks.
//
// Credentials travel as `Authorization: Bearer <credential>` on every
// request. Browsers cannot set headers on a WebSocket or an EventSource, so
// a WebSocket may carry it as a subprotocol entry `bearer.<credential>`
// (offered beside `agentwire`, which the server selects), and any request
// as a `token` query parameter. Credentials are never logged.
package auth

import (
	"bufio"
	"bytes"
	"crypto"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"

	"github.com/agentwire/agentwire/internal/identity"
)

// Modes of authentication.
const (
	ModeNone = "none"
	ModeKeys = "keys"
	ModeJWT  = "jwt"
)

// Subprotocol is the WebSocket subprotocol the server selects when a
// client offers it with a bearer entry: browsers fail a handshake that
// offered subprotocols and got none back.
const Subprotocol = "agentwire"

// bearerProtocol starts a subprotocol entry that carries a credential.
const bearerProtocol = "bearer."

// Config is what New needs.
type Config struct {
	Mode string
	// APIKeys are "principal=key" pairs separated by commas (the
	// AGENTWIRE_API_KEYS variable).
	APIKeys string
	// APIKeysFile has one "principal=key" per line; '#' starts a comment.
	APIKeysFile string
	// JWTKeys is a file of PEM public keys (RSA or Ed25519) or a JWK Set.
	JWTKeys string
	// JWTSecret is an HS256 secret (the AGENTWIRE_JWT_SECRET variable).
	JWTSecret string
	// JWTAudience, if set, must be among a token's audiences.
	JWTAudience string
}

// New returns the Authenticator cfg describes.
func New(cfg Config) (identity.Authenticator, error) {
	switch cfg.Mode {
	case "", ModeNone:
		return identity.None, nil
	case ModeKeys:
		return newKeys(cfg)
	case ModeJWT:
		return newJWT(cfg)
	}
	return nil, fmt.Errorf("--auth %q: want none, keys or jwt", cfg.Mode)
}

// credential finds the request's credential: the Authorization header, a
// bearer subprotocol entry, or the token query parameter, in that order.
func credential(r *http.Request) string {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, cred, ok := strings.Cut(h, " ")
		if ok && strings.EqualFold(scheme, "Bearer") {
			return strings.TrimSpace(cred)
		}
		return ""
	}
	for _, v := range r.Header.Values("Sec-WebSocket-Protocol") {
		for p := range strings.SplitSeq(v, ",") {
			if p = strings.TrimSpace(p); strings.HasPrefix(p, bearerProtocol) {
				return p[len(bearerProtocol):]
			}
		}
	}
	return r.URL.Query().Get("token")
}

var errNoCredential = &identity.AuthError{Reason: "no credential (send Authorization: Bearer <credential>)"}

// keys authenticates API keys. It keeps their SHA-256 digests only, and
// compares a presented key's digest with every one in constant time.
type keys struct {
	digests []keyDigest
}

type keyDigest struct {
	principal string
	sum       [sha256.Size]byte
}

func newKeys(cfg Config) (*keys, error) {
	k := &keys{}
	add := func(where, line string) error {
		principal, key, ok := strings.Cut(strings.TrimSpace(line), "=")
		principal, key = strings.TrimSpace(principal), strings.TrimSpace(key)
		if !ok || principal == "" || key == "" {
			return fmt.Errorf("%s: want principal=key", where)
		}
		if len(key) < 16 {
			return fmt.Errorf("%s: the key of %q is shorter than 16 characters", where, principal)
		}
		k.digests = append(k.digests, keyDigest{principal: principal, sum: sha256.Sum256([]byte(key))})
		return nil
	}
	if cfg.APIKeys != "" {
		for i, pair := range strings.Split(cfg.APIKeys, ",") {
			if err := add(fmt.Sprintf("AGENTWIRE_API_KEYS entry %d", i+1), pair); err != nil {
				return nil, err
			}
		}
	}
	if cfg.APIKeysFile != "" {
		b, err := os.ReadFile(cfg.APIKeysFile)
		if err != nil {
			return nil, fmt.Errorf("--api-keys-file: %w", err)
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for n := 1; sc.Scan(); n++ {
			line := strings.TrimSpace(sc.Text())
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			if err := add(fmt.Sprintf("%s line %d", cfg.APIKeysFile, n), line); err != nil {
				return nil, err
			}
		}
	}
	if len(k.digests) == 0 {
		return nil, errors.New("--auth keys: no API keys: set AGENTWIRE_API_KEYS or --api-keys-file")
	}
	return k, nil
}

func (k *keys) Authenticate(r *http.Request) (identity.Principal, error) {
	cred := credential(r)
	if cred == "" {
		return identity.Principal{}, errNoCredential
	}
	sum := sha256.Sum256([]byte(cred))
	found := -1
	for i, d := range k.digests {
		if subtle.ConstantTimeCompare(sum[:], d.sum[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return identity.Principal{}, &identity.AuthError{Reason: "unknown API key"}
	}
	return identity.Principal{ID: k.digests[found].principal}, nil
}

// jwtAuth authenticates JSON Web Tokens: signed with the HS256 secret, or
// by one of the RS256 / EdDSA keys; exp is required, nbf checked, the
// audience checked when one is configured, and sub is the principal.
type jwtAuth struct {
	keyfunc jwt.Keyfunc
	parser  *jwt.Parser
}

func newJWT(cfg Config) (*jwtAuth, error) {
	opts := []jwt.ParserOption{jwt.WithExpirationRequired(), jwt.WithLeeway(30 * time.Second)}
	if cfg.JWTAudience != "" {
		opts = append(opts, jwt.WithAudience(cfg.JWTAudience))
	}
	a := &jwtAuth{}
	switch {
	case cfg.JWTSecret != "" && cfg.JWTKeys != "":
		return nil, errors.New("--auth jwt: give --jwt-keys or AGENTWIRE_JWT_SECRET, not both")
	case cfg.JWTSecret != "":
		if len(cfg.JWTSecret) < 32 {
			return nil, errors.New("AGENTWIRE_JWT_SECRET: an HS256 secret needs at least 32 characters")
		}
		secret := []byte(cfg.JWTSecret)
		a.keyfunc = func(*jwt.Token) (any, error) { return secret, nil }
		opts = append(opts, jwt.WithValidMethods([]string{"HS256"}))
	case cfg.JWTKeys != "":
		kf, methods, err := loadKeys(cfg.JWTKeys)
		if err != nil {
			return nil, fmt.Errorf("--jwt-keys: %w", err)
		}
		a.keyfunc = kf
		opts = append(opts, jwt.WithValidMethods(methods))
	default:
		return nil, errors.New("--auth jwt: no keys: set --jwt-keys (PEM or JWKS) or AGENTWIRE_JWT_SECRET")
	}
	a.parser = jwt.NewParser(opts...)
	return a, nil
}

// loadKeys reads a JWK Set, or PEM public keys: a token names its key by
// kid in a JWK Set; PEM keys are tried in turn.
func loadKeys(path string) (jwt.Keyfunc, []string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	methods := []string{"RS256", "EdDSA"}
	if trimmed := bytes.TrimSpace(b); len(trimmed) > 0 && trimmed[0] == '{' {
		k, err := keyfunc.NewJWKSetJSON(json.RawMessage(trimmed))
		if err != nil {
			return nil, nil, fmt.Errorf("JWK Set: %w", err)
		}
		return k.Keyfunc, methods, nil
	}
	var pubs []crypto.PublicKey
	for rest := b; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		key, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			if block.Type == "RSA PUBLIC KEY" {
				key, err = x509.ParsePKCS1PublicKey(block.Bytes)
			}
			if err != nil {
				return nil, nil, fmt.Errorf("a %s block: %w", block.Type, err)
			}
		}
		switch key.(type) {
		case *rsa.PublicKey, ed25519.PublicKey:
			pubs = append(pubs, key)
		default:
			return nil, nil, fmt.Errorf("a %T key: only RSA and Ed25519 public keys are supported", key)
		}
	}
	if len(pubs) == 0 {
		return nil, nil, errors.New("no PEM public key or JWK Set in the file")
	}
	return func(t *jwt.Token) (any, error) {
		var set jwt.VerificationKeySet
		for _, k := range pubs {
			switch k.(type) {
			case *rsa.PublicKey:
				if t.Method.Alg() == "RS256" {
					set.Keys = append(set.Keys, k)
				}
			case ed25519.PublicKey:
				if t.Method.Alg() == "EdDSA" {
					set.Keys = append(set.Keys, k)
				}
			}
		}
		if len(set.Keys) == 0 {
			return nil, fmt.Errorf("no key for %s", t.Method.Alg())
		}
		return set, nil
	}, methods, nil
}

func (a *jwtAuth) Authenticate(r *http.Request) (identity.Principal, error) {
	cred := credential(r)
	if cred == "" {
		return identity.Principal{}, errNoCredential
	}
	tok, err := a.parser.Parse(cred, a.keyfunc)
	if err != nil {
		return identity.Principal{}, &identity.AuthError{Reason: reason(err)}
	}
	sub, err := tok.Claims.GetSubject()
	if err != nil || sub == "" {
		return identity.Principal{}, &identity.AuthError{Reason: "the token has no subject"}
	}
	return identity.Principal{ID: sub}, nil
}

// reason words a token's refusal without repeating the token.
func reason(err error) string {
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		return "the token has expired"
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return "the token is not valid yet"
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return "the token lacks a required claim (exp)"
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return "the token is for another audience"
	case errors.Is(err, jwt.ErrTokenSignatureInvalid), errors.Is(err, jwt.ErrTokenUnverifiable):
		return "the token's signature does not verify"
	case errors.Is(err, jwt.ErrTokenMalformed):
		return "the token is malformed"
	}
	return "the token is not valid"
}
