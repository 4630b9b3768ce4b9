// s3proxy: an HTTP-level fault proxy for S3 (path-style), between Toxiproxy's `s3` proxy and MinIO.
//
// Every request is forwarded unchanged (Host header kept: SigV4 signs it; bodies streamed; keep-alive) unless
// a rule acts on it: delay, answer an S3 error, forward and then drop the answer, or hold it until released.
// Rules, events and held requests are driven over a JSON API on its own port. See docs/s3proxy.md.
//
//	s3proxy -listen 127.0.0.1:9100 -upstream 127.0.0.1:9000 -api 127.0.0.1:9101 -seed 1
//
// With TLS on S3 (an https:// upstream): -upstream-ca names the PEM of the CA that signed the upstream's
// certificate, and -tls-cert/-tls-key make the S3-facing side serve TLS too, so clients keep speaking HTTPS end to
// end while the proxy still sees each request. The API stays plain HTTP on loopback.
package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/xml"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Outcomes recorded in end events.
const (
	OutForwarded     = "forwarded"      // no rule acted; the upstream's answer was sent
	OutDelayed       = "delayed"        // a delay rule acted, then the upstream's answer was sent
	OutErrored       = "errored"        // an S3 error was answered (error rule, or a hold released with error)
	OutDropped       = "dropped"        // the connection was closed without an answer
	OutReleased      = "released"       // held, released with forward, the upstream's answer sent
	OutUpstreamError = "upstream_error" // the upstream could not be reached or failed: connection closed
	OutClientGone    = "client_gone"    // the client went away before the answer
	OutAborted       = "aborted"        // the answer was cut off while streaming
	OutHeld          = "held"           // (held events only)
)

// exchange is one request on its way through the proxy.
type exchange struct {
	id       string
	req      Request
	rule     *RuleSpec
	w        *countingWriter
	body     *countingBody
	began    time.Time
	declared int64
	base     string // outcome if the forward succeeds: forwarded, delayed or released
	outcome  string
	upstream int
	release  Release
	err      string
	finished bool // the end event is recorded
}

type exchangeKey struct{}

// Proxy is the S3-facing handler.
type Proxy struct {
	rules    *Rules
	holds    *Holds
	events   *Ring
	stats    *Stats
	rp       *httputil.ReverseProxy
	ids      atomic.Uint64
	inFlight atomic.Int64
	verbose  bool
	logger   *log.Logger
}

func NewProxy(upstream *url.URL, rules *Rules, events *Ring, logger *log.Logger, verbose bool,
	upstreamTLS *tls.Config) *Proxy {
	p := &Proxy{rules: rules, holds: NewHolds(), events: events, stats: NewStats(), verbose: verbose, logger: logger}
	transport := &http.Transport{
		TLSClientConfig:       upstreamTLS, // nil: the system's roots (an https upstream signed by a public CA)
		Proxy:                 nil, // never an HTTP(S)_PROXY from the environment
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          512,
		MaxIdleConnsPerHost:   512,
		IdleConnTimeout:       90 * time.Second,
		DisableCompression:    true, // bodies pass as they are
		ExpectContinueTimeout: 0,    // the client already got its 100 Continue from us
	}
	p.rp = &httputil.ReverseProxy{
		// Director, deprecated in favour of Rewrite, is used on purpose: it changes nothing but the target. The
		// inbound Host header stays (SigV4 signs it), the query is passed as it came, and no X-Forwarded-*
		// header is added. (Rewrite strips forwarding headers and unparsable query parameters.)
		Director: func(r *http.Request) {
			r.URL.Scheme = upstream.Scheme
			r.URL.Host = upstream.Host
			if _, ok := r.Header["X-Forwarded-For"]; !ok {
				r.Header["X-Forwarded-For"] = nil // nil: the reverse proxy adds none
			}
		},
		Transport:      transport,
		FlushInterval:  -1, // flush every write: streaming answers reach the client at once
		BufferPool:     newBufferPool(),
		ModifyResponse: p.afterUpstream,
		ErrorHandler:   p.forwardFailed,
		ErrorLog:       logger,
	}
	return p
}

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	x := &exchange{
		id:       "q" + strconv.FormatUint(p.ids.Add(1), 10),
		req:      Classify(r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("X-Amz-Copy-Source")),
		w:        &countingWriter{ResponseWriter: w},
		began:    time.Now(),
		declared: r.ContentLength,
		base:     OutForwarded,
	}
	x.rule = p.rules.Pick(&x.req)
	if r.Body != nil && r.Body != http.NoBody {
		x.body = &countingBody{ReadCloser: r.Body}
		r.Body = x.body
	}
	p.events.Append(x.event("start"))
	p.inFlight.Add(1)
	done := false
	defer func() { // also while the reverse proxy panics with http.ErrAbortHandler (an answer cut off)
		p.inFlight.Add(-1)
		if !done && x.outcome == "" {
			x.outcome = OutAborted
			if r.Context().Err() != nil {
				x.outcome = OutClientGone
			}
		}
		if !x.finished {
			p.finish(x)
		}
	}()
	p.serve(x, r)
	done = true
}

func (p *Proxy) serve(x *exchange, r *http.Request) {
	ctx := r.Context()
	if x.rule != nil && x.rule.Phase == "before" {
		switch x.rule.Action {
		case ActDelay:
			if !sleep(ctx, p.rules.Delay(x.rule)) {
				x.outcome = OutClientGone
				return
			}
			x.base = OutDelayed
		case ActError:
			p.answerError(x, r, x.rule.Status, x.rule.Code, x.rule.Message)
			return
		case ActDrop:
			p.drop(x, OutDropped)
			return
		case ActHold:
			rel, ok := p.hold(ctx, x)
			if !ok {
				x.outcome = OutClientGone
				return
			}
			switch rel.Mode {
			case ModeDrop:
				p.drop(x, OutDropped) // nothing reached the upstream
				return
			case ModeError:
				p.answerError(x, r, rel.Status, rel.Code, rel.Message)
				return
			}
			x.base = OutReleased
		}
	}
	p.rp.ServeHTTP(x.w, r.WithContext(context.WithValue(ctx, exchangeKey{}, x)))
	if x.outcome == "" {
		x.outcome = x.base
	}
}

// actionAfter is how afterUpstream hands an after-phase error or drop to forwardFailed.
type actionAfter struct {
	mode    string
	status  int
	code    string
	message string
}

func (a *actionAfter) Error() string { return "s3proxy rule: " + a.mode }

var errClientGone = errors.New("client went away")

// afterUpstream runs once the upstream answered, before anything of the answer is sent (ModifyResponse).
func (p *Proxy) afterUpstream(res *http.Response) error {
	x, _ := res.Request.Context().Value(exchangeKey{}).(*exchange)
	if x == nil {
		return nil
	}
	x.upstream = res.StatusCode
	if x.rule == nil || x.rule.Phase != "after" {
		return nil
	}
	ctx := res.Request.Context()
	switch x.rule.Action {
	case ActDelay:
		if !sleep(ctx, p.rules.Delay(x.rule)) {
			return errClientGone
		}
		x.base = OutDelayed
	case ActError:
		return &actionAfter{mode: ModeError, status: x.rule.Status, code: x.rule.Code, message: x.rule.Message}
	case ActDrop:
		return &actionAfter{mode: ModeDrop}
	case ActHold:
		rel, ok := p.hold(ctx, x)
		if !ok {
			return errClientGone
		}
		if rel.Mode != ModeForward {
			return &actionAfter{mode: rel.Mode, status: rel.Status, code: rel.Code, message: rel.Message}
		}
		x.base = OutReleased
	}
	return nil
}

// forwardFailed handles after-phase actions and upstream failures (ErrorHandler). Nothing was sent yet.
func (p *Proxy) forwardFailed(w http.ResponseWriter, r *http.Request, err error) {
	x, _ := r.Context().Value(exchangeKey{}).(*exchange)
	if x == nil {
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	var after *actionAfter
	switch {
	case errors.As(err, &after) && after.mode == ModeDrop:
		p.drop(x, OutDropped)
	case errors.As(err, &after):
		p.answerError(x, r, after.status, after.code, after.message)
	case errors.Is(err, errClientGone) || r.Context().Err() != nil:
		x.outcome = OutClientGone
	default:
		// MinIO down or failing: close the connection without an answer, as Toxiproxy alone did when its
		// upstream refused, so clients see the same thing with or without this proxy in the chain.
		x.err = oneLine(err.Error())
		p.drop(x, OutUpstreamError)
	}
}

// hold parks the request until released through the API, a reset, or its timeout. false: the client left.
func (p *Proxy) hold(ctx context.Context, x *exchange) (Release, bool) {
	parked := p.holds.park(x.id, x.req, x.rule.ID, x.rule.Phase)
	e := x.event("held")
	e.Outcome = OutHeld
	p.events.Append(e)
	timer := time.NewTimer(time.Duration(x.rule.HoldTimeoutMs) * time.Millisecond)
	defer timer.Stop()
	var rel Release
	select {
	case rel = <-parked.ch:
	case <-timer.C:
		if _, mine := p.holds.take(x.id); mine {
			rel = Release{Mode: x.rule.OnTimeout, By: "timeout"}
		} else {
			rel = <-parked.ch // released at the same moment
		}
	case <-ctx.Done():
		if _, mine := p.holds.take(x.id); !mine {
			<-parked.ch
		}
		return Release{}, false
	}
	if rel.Mode == ModeError {
		if rel.Status == 0 {
			rel.Status = x.rule.Status
		}
		if rel.Code == "" {
			rel.Code = x.rule.Code
			if rel.Status != x.rule.Status {
				rel.Code = DefaultCode(rel.Status)
			}
		}
		if rel.Message == "" {
			rel.Message = DefaultMessage(rel.Code)
		}
	}
	x.release = rel
	return rel, true
}

// answerError answers an S3 error without (or instead of) the upstream's answer.
func (p *Proxy) answerError(x *exchange, r *http.Request, status int, code, message string) {
	var body strings.Builder
	body.WriteString(xml.Header)
	body.WriteString("<Error><Code>")
	xml.EscapeText(&body, []byte(code))
	body.WriteString("</Code><Message>")
	xml.EscapeText(&body, []byte(message))
	body.WriteString("</Message><Resource>")
	xml.EscapeText(&body, []byte(r.URL.Path))
	body.WriteString("</Resource><RequestId>")
	xml.EscapeText(&body, []byte(x.id))
	body.WriteString("</RequestId><HostId>s3proxy</HostId></Error>")
	h := x.w.Header()
	for name := range h {
		delete(h, name)
	}
	h.Set("Content-Type", "application/xml")
	h.Set("Content-Length", strconv.Itoa(body.Len()))
	h.Set("X-Amz-Request-Id", x.id)
	h.Set("X-S3proxy-Rule", x.rule.ID)
	x.w.WriteHeader(status)
	if r.Method != http.MethodHead {
		io.WriteString(x.w, body.String())
	}
	x.outcome = OutErrored
}

// drop closes the client connection without an answer. The end event is recorded first, so it exists by the
// time the client sees the connection close.
func (p *Proxy) drop(x *exchange, outcome string) {
	x.outcome = outcome
	conn, _, err := x.w.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler) // the server closes the connection; nothing was written yet
	}
	p.finish(x)
	conn.Close()
}

func (p *Proxy) finish(x *exchange) {
	x.finished = true
	e := x.event("end")
	e.Status = x.w.status
	if x.w.hijacked {
		e.Status = 0
	}
	e.UpstreamStatus = x.upstream
	if x.body != nil {
		e.BytesIn = x.body.n.Load()
	}
	e.BytesOut = x.w.bytes
	e.DurationMs = float64(time.Since(x.began).Microseconds()) / 1000
	e.Outcome = x.outcome
	e.Release = x.release.Mode
	e.ReleasedBy = x.release.By
	e.Error = x.err
	p.events.Append(e)
	p.stats.Count(x.req.Op, x.outcome)
	if p.verbose {
		p.logger.Printf("%s %s %s /%s/%s -> %d %s %.1f ms rule=%s", x.id, x.req.Op, x.req.Method, x.req.Bucket,
			x.req.Key, e.Status, e.Outcome, e.DurationMs, e.Rule)
	}
}

func (x *exchange) event(kind string) Event {
	e := Event{Type: kind, RequestID: x.id, Op: x.req.Op, Method: x.req.Method, Bucket: x.req.Bucket,
		Key: x.req.Key, SourceBucket: x.req.SourceBucket, SourceKey: x.req.SourceKey, Query: x.req.Query,
		ContentLength: x.declared}
	if x.rule != nil {
		e.Rule, e.Action, e.Phase = x.rule.ID, x.rule.Action, x.rule.Phase
	}
	return e
}

func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// countingWriter records the status and body bytes sent, and can hand the connection over (drop).
type countingWriter struct {
	http.ResponseWriter
	status   int
	bytes    int64
	hijacked bool
}

func (w *countingWriter) WriteHeader(code int) {
	if code == http.StatusContinue {
		return // the server sends its own 100 Continue when the body is first read: never a second one
	}
	if code >= 100 && code < 200 {
		w.ResponseWriter.WriteHeader(code)
		return
	}
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *countingWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

func (w *countingWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *countingWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, rw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err == nil {
		w.hijacked = true
	}
	return conn, rw, err
}

func (w *countingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

type countingBody struct {
	io.ReadCloser
	n atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

type bufferPool struct{ pool sync.Pool }

func newBufferPool() *bufferPool {
	return &bufferPool{pool: sync.Pool{New: func() any { return make([]byte, 64<<10) }}}
}
func (b *bufferPool) Get() []byte  { return b.pool.Get().([]byte) }
func (b *bufferPool) Put(v []byte) { b.pool.Put(v) } //nolint:staticcheck // a slice header is fine here

// -- the API ----------------------------------------------------------------------------------------------

const maxWait = 60 * time.Second

// API serves the JSON control interface.
type API struct {
	proxy    *Proxy
	logger   *log.Logger
	listen   string
	upstream string
}

func (a *API) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", a.health)
	mux.HandleFunc("GET /rules", a.listRules)
	mux.HandleFunc("POST /rules", a.addRule)
	mux.HandleFunc("DELETE /rules", a.clearRules)
	mux.HandleFunc("DELETE /rules/{id}", a.removeRule)
	mux.HandleFunc("GET /events", a.listEvents)
	mux.HandleFunc("GET /held", a.listHeld)
	mux.HandleFunc("POST /held/{id}", a.release)
	mux.HandleFunc("GET /stats", a.stats)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fail(w, http.StatusNotFound, fmt.Sprintf("no such endpoint: %s %s", r.Method, r.URL.Path))
	})
	return mux
}

func reply(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	encoder := json.NewEncoder(w)
	encoder.SetEscapeHTML(false) // regexps and messages stay readable: '>' not '\u003e'
	encoder.Encode(body)
}

func compact(value any) string {
	var out strings.Builder
	encoder := json.NewEncoder(&out)
	encoder.SetEscapeHTML(false)
	encoder.Encode(value)
	return strings.TrimSpace(out.String())
}

func fail(w http.ResponseWriter, status int, message string) {
	reply(w, status, map[string]string{"error": oneLine(message)})
}

// decode reads exactly one JSON object with no unknown field.
func decode(w http.ResponseWriter, r *http.Request, into any) error {
	decoder := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	decoder.DisallowUnknownFields()
	if err := decoder.Decode(into); err != nil {
		if errors.Is(err, io.EOF) {
			return errors.New("empty body: send one JSON object")
		}
		return fmt.Errorf("invalid JSON: %v", err)
	}
	if decoder.More() {
		return errors.New("invalid JSON: more than one value in the body")
	}
	return nil
}

func (a *API) health(w http.ResponseWriter, r *http.Request) {
	p := a.proxy
	reply(w, http.StatusOK, map[string]any{"ok": true, "listen": a.listen, "upstream": a.upstream,
		"rules": p.rules.Len(), "held": p.holds.Len(), "in_flight": p.inFlight.Load(), "last_seq": p.events.Last()})
}

func (a *API) listRules(w http.ResponseWriter, r *http.Request) {
	reply(w, http.StatusOK, map[string]any{"rules": a.proxy.rules.Views()})
}

func (a *API) addRule(w http.ResponseWriter, r *http.Request) {
	var spec RuleSpec
	if err := decode(w, r, &spec); err != nil {
		fail(w, http.StatusBadRequest, "rule: "+err.Error())
		return
	}
	added, err := a.proxy.rules.Add(spec)
	if err != nil {
		fail(w, http.StatusBadRequest, "rule: "+err.Error())
		return
	}
	a.logger.Printf("rule %s added: %s", added.ID, compact(added))
	reply(w, http.StatusCreated, map[string]string{"id": added.ID})
}

func (a *API) removeRule(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !a.proxy.rules.Remove(id) {
		fail(w, http.StatusNotFound, fmt.Sprintf("no rule with id %q", id))
		return
	}
	a.logger.Printf("rule %s removed", id)
	reply(w, http.StatusOK, map[string]string{"removed": id})
}

func (a *API) clearRules(w http.ResponseWriter, r *http.Request) {
	removed := a.proxy.rules.Clear()
	released := a.proxy.holds.ReleaseAll(Release{Mode: ModeForward, By: "reset"})
	a.logger.Printf("rules cleared: %d removed, %d held requests released (forward)", removed, released)
	reply(w, http.StatusOK, map[string]int{"removed": removed, "released": released})
}

func queryInt(r *http.Request, name string, fallback, lo, hi int64) (int64, error) {
	text := r.URL.Query().Get(name)
	if text == "" {
		return fallback, nil
	}
	n, err := strconv.ParseInt(text, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("%s=%q is not an integer in %d..%d", name, text, lo, hi)
	}
	return n, nil
}

func (a *API) listEvents(w http.ResponseWriter, r *http.Request) {
	since, err := queryInt(r, "since", 0, 0, 1<<62)
	if err == nil {
		var waitMs, limit int64
		if waitMs, err = queryInt(r, "wait_ms", 0, 0, maxWait.Milliseconds()); err == nil {
			if limit, err = queryInt(r, "limit", 1000, 1, 100_000); err == nil {
				events, next, lost := a.proxy.events.Wait(r.Context(), uint64(since),
					time.Duration(waitMs)*time.Millisecond, int(limit))
				reply(w, http.StatusOK, map[string]any{"events": events, "next": next, "lost": lost,
					"last": a.proxy.events.Last()})
				return
			}
		}
	}
	fail(w, http.StatusBadRequest, err.Error())
}

func (a *API) listHeld(w http.ResponseWriter, r *http.Request) {
	reply(w, http.StatusOK, map[string]any{"held": a.proxy.holds.Views()})
}

func (a *API) release(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	rel := Release{Mode: ModeForward}
	if r.ContentLength != 0 {
		if err := decode(w, r, &rel); err != nil {
			fail(w, http.StatusBadRequest, "release: "+err.Error())
			return
		}
	}
	switch rel.Mode = strings.ToLower(rel.Mode); rel.Mode {
	case "":
		rel.Mode = ModeForward
	case ModeForward, ModeDrop, ModeError:
	default:
		fail(w, http.StatusBadRequest, fmt.Sprintf("release: mode %q is not forward, drop or error", rel.Mode))
		return
	}
	if rel.Mode != ModeError && (rel.Status != 0 || rel.Code != "" || rel.Message != "") {
		fail(w, http.StatusBadRequest, "release: status, code and message are for mode error")
		return
	}
	if rel.Status != 0 && (rel.Status < 400 || rel.Status > 599) {
		fail(w, http.StatusBadRequest, fmt.Sprintf("release: status %d is not an HTTP error status (400-599)", rel.Status))
		return
	}
	rel.By = "api"
	if !a.proxy.holds.Release(id, rel) {
		fail(w, http.StatusNotFound, fmt.Sprintf("no held request with id %q (released, timed out or never held)", id))
		return
	}
	a.logger.Printf("held request %s released: %s", id, rel.Mode)
	reply(w, http.StatusOK, map[string]string{"released": id, "mode": rel.Mode})
}

func (a *API) stats(w http.ResponseWriter, r *http.Request) {
	p := a.proxy
	reply(w, http.StatusOK, map[string]any{"requests": p.stats.Snapshot(), "in_flight": p.inFlight.Load(),
		"held": p.holds.Len(), "rules": p.rules.Len(), "last_seq": p.events.Last()})
}

// -- main -------------------------------------------------------------------------------------------------

func upstreamURL(text string) (*url.URL, error) {
	if !strings.Contains(text, "://") {
		text = "http://" + text
	}
	u, err := url.Parse(text)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("-upstream %q is not host:port or http(s)://host:port", text)
	}
	return u, nil
}

func main() {
	listen := flag.String("listen", "127.0.0.1:9100", "address the S3-facing proxy listens on")
	upstream := flag.String("upstream", "127.0.0.1:9000", "the S3 server (MinIO) requests go to: host:port")
	apiAddr := flag.String("api", "127.0.0.1:9101", "address of the JSON control API")
	seed := flag.Uint64("seed", 1, "seed of the random source for rule probabilities and jitter")
	capacity := flag.Int("events", 100_000, "events kept in the ring")
	verbose := flag.Bool("verbose", false, "log one line per request")
	upstreamCA := flag.String("upstream-ca", "", "PEM file of the CA that signed an https upstream's certificate")
	tlsCert := flag.String("tls-cert", "", "PEM certificate the S3-facing side serves TLS with (with -tls-key)")
	tlsKey := flag.String("tls-key", "", "PEM private key of -tls-cert")
	flag.Parse()

	logger := log.New(os.Stdout, "s3proxy ", log.LstdFlags|log.Lmicroseconds)
	target, err := upstreamURL(*upstream)
	if err != nil {
		logger.Fatal(err)
	}
	rules := NewRules(*seed)
	events := NewRing(*capacity)
	var upstreamTLS *tls.Config
	if *upstreamCA != "" {
		pem, err := os.ReadFile(*upstreamCA)
		if err != nil {
			logger.Fatalf("cannot read -upstream-ca: %v", err)
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			logger.Fatalf("-upstream-ca %s holds no PEM certificate", *upstreamCA)
		}
		upstreamTLS = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	}
	if (*tlsCert == "") != (*tlsKey == "") {
		logger.Fatal("-tls-cert and -tls-key go together")
	}
	proxy := NewProxy(target, rules, events, logger, *verbose, upstreamTLS)
	api := &API{proxy: proxy, logger: logger, listen: *listen, upstream: target.Host}

	proxyListener, err := net.Listen("tcp", *listen)
	if err != nil {
		logger.Fatalf("cannot listen on %s: %v", *listen, err)
	}
	apiListener, err := net.Listen("tcp", *apiAddr)
	if err != nil {
		logger.Fatalf("cannot listen on %s (api): %v", *apiAddr, err)
	}
	proxyServer := &http.Server{Handler: proxy, ReadHeaderTimeout: time.Minute, IdleTimeout: 5 * time.Minute,
		ErrorLog: logger}
	apiServer := &http.Server{Handler: api.Handler(), ReadHeaderTimeout: 10 * time.Second, ErrorLog: logger}
	serve := func(server *http.Server, listener net.Listener, what string) {
		if err := server.Serve(listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Fatalf("%s server failed: %v", what, err)
		}
	}
	if *tlsCert != "" {
		pair, err := tls.LoadX509KeyPair(*tlsCert, *tlsKey)
		if err != nil {
			logger.Fatalf("cannot load -tls-cert/-tls-key: %v", err)
		}
		proxyListener = tls.NewListener(proxyListener, &tls.Config{Certificates: []tls.Certificate{pair},
			MinVersion: tls.VersionTLS12})
	}
	go serve(proxyServer, proxyListener, "proxy")
	go serve(apiServer, apiListener, "api")
	logger.Printf("listening on %s, upstream %s, api on %s, seed %d", proxyListener.Addr(), target.Host,
		apiListener.Addr(), *seed)

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	got := <-stop
	logger.Printf("%s: shutting down", got)
	released := proxy.holds.ReleaseAll(Release{Mode: ModeDrop, By: "shutdown"})
	events.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	apiServer.Shutdown(ctx)
	if err := proxyServer.Shutdown(ctx); err != nil {
		proxyServer.Close()
	}
	logger.Printf("stopped (%d held requests dropped); requests by op and outcome: %s", released,
		compact(proxy.stats.Snapshot()))
}
