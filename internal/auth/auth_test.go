package auth_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/auth"
	"github.com/agentwire/agentwire/internal/identity"
)

// request builds a request carrying cred the way how says: "header",
// "subprotocol" or "query".
func request(how, cred string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/ws", nil)
	switch how {
	case "header":
		r.Header.Set("Authorization", "Bearer "+cred)
	case "subprotocol":
		r.Header.Set("Sec-WebSocket-Protocol", auth.Subprotocol+", bearer."+cred)
	case "query":
		r.URL.RawQuery = "token=" + cred
	}
	return r
}

func principal(t *testing.T, a identity.Authenticator, r *http.Request) (string, error) {
	t.Helper()
	p, err := a.Authenticate(r)
	if err != nil {
		require.ErrorIs(t, err, identity.ErrUnauthenticated)
		return "", err
	}
	return p.ID, nil
}

func TestNone(t *testing.T) {
	a, err := auth.New(auth.Config{Mode: "none"})
	require.NoError(t, err)
	id, err := principal(t, a, request("", ""))
	require.NoError(t, err)
	assert.Equal(t, "anonymous", id)
}

func TestKeys(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "keys")
	require.NoError(t, os.WriteFile(file, []byte("# team keys\nbob = bob-key-0123456789abcdef\n\n"), 0o600))
	a, err := auth.New(auth.Config{Mode: "keys", APIKeys: "alice=alice-key-0123456789abcdef", APIKeysFile: file})
	require.NoError(t, err)
	for _, how := range []string{"header", "subprotocol", "query"} {
		id, err := principal(t, a, request(how, "alice-key-0123456789abcdef"))
		require.NoError(t, err, how)
		assert.Equal(t, "alice", id, how)
	}
	id, err := principal(t, a, request("header", "bob-key-0123456789abcdef"))
	require.NoError(t, err)
	assert.Equal(t, "bob", id)

	_, err = principal(t, a, request("header", "alice-key-0123456789abcdeX"))
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "alice-key", "the refusal does not repeat the key")
	_, err = principal(t, a, request("", ""))
	assert.Error(t, err, "no credential")
	r := request("", "")
	r.Header.Set("Authorization", "Basic YWxpY2U6eA==")
	_, err = principal(t, a, r)
	assert.Error(t, err, "another scheme")

	for _, bad := range []auth.Config{
		{Mode: "keys"},
		{Mode: "keys", APIKeys: "alice"},
		{Mode: "keys", APIKeys: "alice=short"},
		{Mode: "keys", APIKeysFile: filepath.Join(dir, "missing")},
		{Mode: "sometimes"},
	} {
		_, err := auth.New(bad)
		assert.Error(t, err, "%+v", bad)
	}
}

const secret = "a-secret-of-at-least-thirty-two-chars!"

func sign(t *testing.T, method jwt.SigningMethod, key any, claims jwt.MapClaims, kid string) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	require.NoError(t, err)
	return s
}

func claims(sub string, exp time.Duration, extra ...any) jwt.MapClaims {
	c := jwt.MapClaims{"sub": sub, "exp": time.Now().Add(exp).Unix()}
	for i := 0; i+1 < len(extra); i += 2 {
		c[extra[i].(string)] = extra[i+1]
	}
	return c
}

func TestJWTWithSecret(t *testing.T) {
	a, err := auth.New(auth.Config{Mode: "jwt", JWTSecret: secret, JWTAudience: "agentwire"})
	require.NoError(t, err)
	key := []byte(secret)
	good := sign(t, jwt.SigningMethodHS256, key, claims("carol", time.Hour, "aud", "agentwire"), "")
	for _, how := range []string{"header", "subprotocol", "query"} {
		id, err := principal(t, a, request(how, good))
		require.NoError(t, err, how)
		assert.Equal(t, "carol", id)
	}
	for name, tok := range map[string]string{
		"expired":         sign(t, jwt.SigningMethodHS256, key, claims("carol", -time.Hour, "aud", "agentwire"), ""),
		"not yet valid":   sign(t, jwt.SigningMethodHS256, key, claims("carol", time.Hour, "aud", "agentwire", "nbf", time.Now().Add(time.Hour).Unix()), ""),
		"no exp":          sign(t, jwt.SigningMethodHS256, key, jwt.MapClaims{"sub": "carol", "aud": "agentwire"}, ""),
		"other audience":  sign(t, jwt.SigningMethodHS256, key, claims("carol", time.Hour, "aud", "elsewhere"), ""),
		"no subject":      sign(t, jwt.SigningMethodHS256, key, claims("", time.Hour, "aud", "agentwire"), ""),
		"another secret":  sign(t, jwt.SigningMethodHS256, []byte("another-secret-of-thirty-two-chars!!"), claims("carol", time.Hour, "aud", "agentwire"), ""),
		"HS512":           sign(t, jwt.SigningMethodHS512, key, claims("carol", time.Hour, "aud", "agentwire"), ""),
		"alg none":        sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, claims("carol", time.Hour, "aud", "agentwire"), ""),
		"garbage":         "not.a.token",
		"cut off":         good[:len(good)-5],
		"payload swapped": swapPayload(t, good, claims("mallory", time.Hour, "aud", "agentwire")),
	} {
		_, err := principal(t, a, request("header", tok))
		require.Error(t, err, name)
		assert.NotContains(t, err.Error(), tok, name)
	}
	_, err = auth.New(auth.Config{Mode: "jwt", JWTSecret: "short"})
	assert.Error(t, err, "a short secret")
	_, err = auth.New(auth.Config{Mode: "jwt"})
	assert.Error(t, err, "no keys")
}

// swapPayload replaces a token's claims, keeping its signature.
func swapPayload(t *testing.T, tok string, c jwt.MapClaims) string {
	t.Helper()
	b, err := json.Marshal(c)
	require.NoError(t, err)
	parts := []byte(tok)
	var dots []int
	for i, ch := range parts {
		if ch == '.' {
			dots = append(dots, i)
		}
	}
	return tok[:dots[0]+1] + base64.RawURLEncoding.EncodeToString(b) + tok[dots[1]:]
}

func TestJWTWithPublicKeys(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	edPub, edKey, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	var pemKeys []byte
	for _, pub := range []any{&rsaKey.PublicKey, edPub} {
		der, err := x509.MarshalPKIXPublicKey(pub)
		require.NoError(t, err)
		pemKeys = append(pemKeys, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})...)
	}
	dir := t.TempDir()
	pemFile := filepath.Join(dir, "keys.pem")
	require.NoError(t, os.WriteFile(pemFile, pemKeys, 0o600))
	a, err := auth.New(auth.Config{Mode: "jwt", JWTKeys: pemFile})
	require.NoError(t, err)
	for name, tok := range map[string]string{
		"RS256": sign(t, jwt.SigningMethodRS256, rsaKey, claims("dave", time.Hour), ""),
		"EdDSA": sign(t, jwt.SigningMethodEdDSA, edKey, claims("erin", time.Hour), ""),
	} {
		id, err := principal(t, a, request("header", tok))
		require.NoError(t, err, name)
		assert.NotEmpty(t, id, name)
	}
	// HS256 signed with the public key's bytes: the classic confusion.
	der, err := x509.MarshalPKIXPublicKey(&rsaKey.PublicKey)
	require.NoError(t, err)
	_, err = principal(t, a, request("header", sign(t, jwt.SigningMethodHS256, der, claims("mallory", time.Hour), "")))
	assert.Error(t, err, "HS256 is not accepted where public keys are configured")
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	_, err = principal(t, a, request("header", sign(t, jwt.SigningMethodRS256, other, claims("mallory", time.Hour), "")))
	assert.Error(t, err, "a key the server does not know")

	// The same RSA key in a JWK Set, found by kid.
	jwks, err := json.Marshal(map[string]any{"keys": []any{map[string]any{
		"kty": "RSA", "kid": "k1", "alg": "RS256", "use": "sig",
		"n": base64.RawURLEncoding.EncodeToString(rsaKey.N.Bytes()),
		"e": base64.RawURLEncoding.EncodeToString(big.NewInt(int64(rsaKey.E)).Bytes()),
	}}})
	require.NoError(t, err)
	jwksFile := filepath.Join(dir, "jwks.json")
	require.NoError(t, os.WriteFile(jwksFile, jwks, 0o600))
	a, err = auth.New(auth.Config{Mode: "jwt", JWTKeys: jwksFile})
	require.NoError(t, err)
	id, err := principal(t, a, request("header", sign(t, jwt.SigningMethodRS256, rsaKey, claims("frank", time.Hour), "k1")))
	require.NoError(t, err)
	assert.Equal(t, "frank", id)
	_, err = principal(t, a, request("header", sign(t, jwt.SigningMethodRS256, rsaKey, claims("frank", time.Hour), "k2")))
	assert.Error(t, err, "an unknown kid")

	require.NoError(t, os.WriteFile(pemFile, []byte("not a key"), 0o600))
	_, err = auth.New(auth.Config{Mode: "jwt", JWTKeys: pemFile})
	assert.Error(t, err)

}
