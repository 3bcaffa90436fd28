package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// selfSigned writes a certificate for 127.0.0.1, valid from a minute ago
// for an hour, and its key, to dir; it returns their paths and a pool that
// trusts the certificate.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(now.UnixNano()),
		Subject:      pkix.Name{CommonName: "lockxd-test"},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		IsCA:         true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// The attack: API keys and hold secrets cross the network in clear text.
// With --tls-cert and --tls-key lockxd speaks only TLS; every tenant's
// metrics are on --metrics-listen, not on the API.
func TestRunTLS(t *testing.T) {
	certFile, keyFile, pool := selfSigned(t, t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 2)
	done := make(chan int, 1)
	env := map[string]string{"LOCKXD_KEYS": "a=key-a"}
	var stderr bytes.Buffer
	go func() {
		done <- run(ctx, []string{"--memory", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--tls-cert", certFile, "--tls-key", keyFile, "--grace", "1s"}, &stderr, func(k string) string { return env[k] }, ready)
	}()
	var addr, maddr string
	select {
	case addr = <-ready:
		maddr = <-ready
	case code := <-done:
		t.Fatalf("lockxd exited %d: %s", code, stderr.String())
	}
	defer func() {
		cancel()
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("exit %d: %s", code, stderr.String())
			}
		case <-time.After(5 * time.Second):
			t.Error("no graceful exit")
		}
	}()
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, DisableKeepAlives: true}
	hc := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	req, _ := http.NewRequest("POST", "https://"+addr+"/v1/locks/try-acquire", strings.NewReader(`{"key":"k","lease_ms":5000}`))
	req.Header.Set("X-API-Key", "key-a")
	res, err := hc.Do(req)
	if err != nil {
		t.Fatalf("over TLS: %v", err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || res.TLS == nil {
		t.Fatalf("over TLS: %d %s", res.StatusCode, body)
	}
	plain := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	if res, err := plain.Get("http://" + addr + "/healthz"); err == nil {
		res.Body.Close()
		if res.StatusCode == 200 {
			t.Fatal("plain HTTP answered 200 on the TLS listener")
		}
	}
	// Metrics: every tenant on the metrics listener, none without a key on the API.
	res, err = hc.Get("https://" + maddr + "/metrics")
	if err != nil {
		t.Fatalf("metrics listener: %v", err)
	}
	body, _ = io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(string(body), `lockxd_held{tenant="a"} 1`) {
		t.Fatalf("metrics listener: %d %s", res.StatusCode, body)
	}
	if res, err := hc.Get("https://" + addr + "/metrics"); err != nil || res.StatusCode != 401 {
		t.Fatalf("/metrics on the API without a key: %v %v", res, err)
	} else {
		res.Body.Close()
	}
	// A certificate without its key is refused at start.
	if code := run(context.Background(), []string{"--memory", "--tls-cert", certFile}, io.Discard, func(k string) string { return env[k] }, nil); code != 2 {
		t.Fatalf("--tls-cert without --tls-key: exit %d", code)
	}
}
