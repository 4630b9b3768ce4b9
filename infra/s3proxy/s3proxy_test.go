package main

import (
	"bufio"
	"context"
	"encoding/json"
	"encoding/xml"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// -- classification ----------------------------------------------------------------------------------------

func TestClassify(t *testing.T) {
	cases := []struct {
		method, path, query, copySource string
		op, bucket, key                 string
	}{
		{"PUT", "/chaos/x/state/1.zip", "", "", OpPut, "chaos", "x/state/1.zip"},
		{"PUT", "/chaos/big", "partNumber=3&uploadId=abc", "", OpPut, "chaos", "big"},
		{"PUT", "/chaos/ck/1.changelog", "", "/chaos/ck/.1.changelog.123.tmp", OpCopy, "chaos", "ck/1.changelog"},
		{"PUT", "/chaos/big", "partNumber=1&uploadId=abc", "chaos/src", OpCopy, "chaos", "big"},
		{"PUT", "/chaos", "", "", OpOther, "chaos", ""}, // CreateBucket
		{"GET", "/chaos/a/b", "", "", OpGet, "chaos", "a/b"},
		{"GET", "/chaos/a/b", "partNumber=1", "", OpGet, "chaos", "a/b"},
		{"HEAD", "/chaos/a", "", "", OpHead, "chaos", "a"},
		{"HEAD", "/chaos", "", "", OpOther, "chaos", ""}, // HeadBucket
		{"DELETE", "/chaos/a", "", "", OpDelete, "chaos", "a"},
		{"DELETE", "/chaos/a", "uploadId=abc", "", OpDelete, "chaos", "a"},
		{"GET", "/chaos", "list-type=2&prefix=x%2F&delimiter=%2F", "", OpList, "chaos", ""},
		{"GET", "/chaos/", "prefix=x", "", OpList, "chaos", ""},
		{"GET", "/chaos", "", "", OpList, "chaos", ""},
		{"GET", "/chaos", "uploads&prefix=x", "", OpList, "chaos", ""},
		{"GET", "/chaos", "location=", "", OpOther, "chaos", ""},
		{"GET", "/chaos", "versioning", "", OpOther, "chaos", ""},
		{"GET", "/", "", "", OpOther, "", ""}, // ListBuckets
		{"POST", "/chaos/big", "uploads", "", OpPost, "chaos", "big"},
		{"POST", "/chaos/big", "uploadId=abc", "", OpPost, "chaos", "big"},
		{"POST", "/chaos", "delete", "", OpPost, "chaos", ""},
		{"PATCH", "/chaos/a", "", "", OpOther, "chaos", "a"},
		{"GET", "/chaos/dir/", "", "", OpGet, "chaos", "dir/"},
		{"PUT", "/chaos/a//b", "", "", OpPut, "chaos", "a//b"},
	}
	for _, c := range cases {
		got := Classify(c.method, c.path, c.query, c.copySource)
		if got.Op != c.op || got.Bucket != c.bucket || got.Key != c.key {
			t.Errorf("%s %s?%s (copy %q): got %s %q %q, want %s %q %q", c.method, c.path, c.query, c.copySource,
				got.Op, got.Bucket, got.Key, c.op, c.bucket, c.key)
		}
	}
}

func TestClassifyKeepsTheRelevantQuery(t *testing.T) {
	got := Classify("GET", "/chaos", "list-type=2&prefix=x%2Fstate%2F&delimiter=%2F&encoding-type=url", "")
	want := map[string]string{"list-type": "2", "prefix": "x/state/", "delimiter": "/"}
	if len(got.Query) != len(want) {
		t.Fatalf("query %v, want %v", got.Query, want)
	}
	for k, v := range want {
		if got.Query[k] != v {
			t.Errorf("query[%s] = %q, want %q", k, got.Query[k], v)
		}
	}
	part := Classify("PUT", "/chaos/k", "partNumber=2&uploadId=u-1", "")
	if part.Query["partNumber"] != "2" || part.Query["uploadId"] != "u-1" {
		t.Errorf("part query %v", part.Query)
	}
	if q := Classify("POST", "/chaos/k", "uploads", "").Query; q["uploads"] != "" || len(q) != 1 {
		t.Errorf("uploads query %v", q)
	}
}

func TestParseCopySource(t *testing.T) {
	cases := map[string][2]string{
		"/chaos/ck/.1.changelog.7f3a.tmp": {"chaos", "ck/.1.changelog.7f3a.tmp"},
		"chaos/ck/a%20b":                  {"chaos", "ck/a b"},
		"/chaos/a%3Fb?versionId=123":      {"chaos", "a?b"},
		"%2Fchaos%2Fstate%2F0%2F1.zip":    {"chaos", "state/0/1.zip"},
		"/chaos/x/y%2Fz":                  {"chaos", "x/y/z"},
	}
	for header, want := range cases {
		bucket, key := ParseCopySource(header)
		if bucket != want[0] || key != want[1] {
			t.Errorf("%q: got %q %q, want %q %q", header, bucket, key, want[0], want[1])
		}
	}
}

// -- rules -------------------------------------------------------------------------------------------------

func spec(t *testing.T, text string) RuleSpec {
	t.Helper()
	var s RuleSpec
	decoder := json.NewDecoder(strings.NewReader(text))
	decoder.DisallowUnknownFields()
	if err := decoder.Decode(&s); err != nil {
		t.Fatalf("%s: %v", text, err)
	}
	return s
}

func TestNormalizeDefaults(t *testing.T) {
	s := spec(t, `{"action": "error", "ops": ["put", "PUT", "copy"]}`)
	if err := s.Normalize(); err != nil {
		t.Fatal(err)
	}
	if s.Status != 503 || s.Code != "SlowDown" || s.Message == "" || s.Phase != "before" ||
		*s.Probability != 1 || !*s.Enabled || len(s.Ops) != 2 || s.Ops[0] != OpPut || s.Ops[1] != OpCopy {
		t.Errorf("defaults: %+v", s)
	}
	d := spec(t, `{"action": "drop_response"}`)
	if err := d.Normalize(); err != nil || d.Phase != "after" {
		t.Errorf("drop_response: phase %q err %v", d.Phase, err)
	}
	h := spec(t, `{"action": "hold"}`)
	if err := h.Normalize(); err != nil || h.HoldTimeoutMs != 60000 || h.OnTimeout != ModeForward || h.Phase != "before" {
		t.Errorf("hold: %+v err %v", h, err)
	}
	e := spec(t, `{"action": "error", "status": 500}`)
	if err := e.Normalize(); err != nil || e.Code != "InternalError" {
		t.Errorf("500: %+v err %v", e, err)
	}
}

func TestNormalizeRejects(t *testing.T) {
	bad := map[string]string{
		`{}`:                    "action is required",
		`{"action": "explode"}`: "not one of delay",
		`{"action": "delay"}`:   "delay_ms > 0",
		`{"action": "delay", "delay_ms": 5, "jitter_ms": -1}`: "jitter_ms",
		`{"action": "error", "delay_ms": 5}`:                  "delay_ms and jitter_ms are for action delay",
		`{"action": "error", "status": 200}`:                  "not an HTTP error status",
		`{"action": "delay", "delay_ms": 1, "status": 503}`:   "status, code and message are for",
		`{"action": "error", "ops": ["FETCH"]}`:               "op \"FETCH\"",
		`{"action": "error", "key": "("}`:                     "key is not a valid Go regexp",
		`{"action": "error", "probability": 1.5}`:             "probability",
		`{"action": "error", "limit": -1}`:                    "limit",
		`{"action": "error", "phase": "during"}`:              "phase",
		`{"action": "hold", "on_timeout": "explode"}`:         "on_timeout",
		`{"action": "error", "hold_timeout_ms": 5}`:           "for action hold",
		`{"action": "error", "id": "a b"}`:                    "id",
	}
	for text, want := range bad {
		s := spec(t, text)
		err := s.Normalize()
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %v, want one line containing %q", text, err, want)
		}
	}
}

func TestMatching(t *testing.T) {
	rules := NewRules(1)
	for _, text := range []string{
		`{"id": "state", "ops": ["PUT"], "key": "^x/state/", "action": "error"}`,
		`{"id": "list", "ops": ["LIST"], "key": "^x/", "action": "delay", "delay_ms": 10}`,
		`{"id": "rename", "ops": ["COPY"], "source_key": "\\.tmp$", "action": "drop_response"}`,
		`{"id": "off", "action": "error", "enabled": false}`,
	} {
		if _, err := rules.Add(spec(t, text)); err != nil {
			t.Fatal(err)
		}
	}
	pick := func(r Request) string {
		if got := rules.Pick(&r); got != nil {
			return got.ID
		}
		return ""
	}
	checks := []struct {
		req  Request
		want string
	}{
		{Classify("PUT", "/chaos/x/state/1.zip", "", ""), "state"},
		{Classify("GET", "/chaos/x/state/1.zip", "", ""), ""},
		{Classify("PUT", "/chaos/x/offsets/1", "", ""), ""},
		{Classify("GET", "/chaos", "list-type=2&prefix=x%2Fstate%2F", ""), "list"},
		{Classify("GET", "/chaos", "list-type=2&prefix=y%2F", ""), ""},
		{Classify("PUT", "/chaos/ck/1.changelog", "", "/chaos/ck/.1.changelog.u.tmp"), "rename"},
		{Classify("PUT", "/chaos/ck/1.changelog", "", "/chaos/ck/other"), ""},
		{Classify("PUT", "/chaos/ck/.1.changelog.u.tmp", "", ""), ""}, // source_key never matches a plain PUT
	}
	for _, c := range checks {
		if got := pick(c.req); got != c.want {
			t.Errorf("%s %s/%s prefix=%q: rule %q, want %q", c.req.Op, c.req.Bucket, c.req.Key, c.req.Query["prefix"], got, c.want)
		}
	}
}

func TestLimitAndOrder(t *testing.T) {
	rules := NewRules(1)
	rules.Add(spec(t, `{"id": "twice", "action": "error", "limit": 2}`))
	rules.Add(spec(t, `{"id": "then", "action": "delay", "delay_ms": 1}`))
	req := Classify("PUT", "/b/k", "", "")
	var got []string
	for i := 0; i < 4; i++ {
		got = append(got, rules.Pick(&req).ID)
	}
	if strings.Join(got, ",") != "twice,twice,then,then" {
		t.Errorf("got %v", got)
	}
	views := rules.Views()
	if views[0].Matched != 4 || views[0].Applied != 2 || views[1].Applied != 2 {
		t.Errorf("counters %+v", views)
	}
	if _, err := rules.Add(spec(t, `{"id": "then", "action": "error"}`)); err == nil {
		t.Error("a duplicate id was accepted")
	}
	if !rules.Remove("twice") || rules.Remove("twice") || rules.Len() != 1 {
		t.Error("remove")
	}
}

func TestProbabilityIsSeeded(t *testing.T) {
	draw := func(seed uint64) []bool {
		rules := NewRules(seed)
		rules.Add(spec(t, `{"action": "error", "probability": 0.3}`))
		req := Classify("GET", "/b/k", "", "")
		out := make([]bool, 2000)
		for i := range out {
			out[i] = rules.Pick(&req) != nil
		}
		return out
	}
	a, b, c := draw(7), draw(7), draw(8)
	same, hits := true, 0
	for i := range a {
		same = same && a[i] == b[i]
		if a[i] {
			hits++
		}
	}
	if !same {
		t.Error("the same seed gave other draws")
	}
	if hits < 500 || hits > 700 {
		t.Errorf("probability 0.3 acted %d times of 2000", hits)
	}
	differs := false
	for i := range a {
		differs = differs || a[i] != c[i]
	}
	if !differs {
		t.Error("another seed gave the same draws")
	}
}

func TestJitterStaysInRange(t *testing.T) {
	rules := NewRules(3)
	s := spec(t, `{"action": "delay", "delay_ms": 100, "jitter_ms": 20}`)
	s.Normalize()
	for i := 0; i < 500; i++ {
		d := rules.Delay(&s)
		if d < 80*time.Millisecond || d > 120*time.Millisecond {
			t.Fatalf("delay %v outside 100±20 ms", d)
		}
	}
}

// -- the ring ----------------------------------------------------------------------------------------------

func TestRingWrapsAndCountsLostEvents(t *testing.T) {
	ring := NewRing(5)
	for i := 0; i < 12; i++ {
		ring.Append(Event{Type: "start"})
	}
	events, next, lost := ring.Wait(context.Background(), 0, 0, 100)
	if len(events) != 5 || events[0].Seq != 8 || events[4].Seq != 12 || next != 12 || lost != 7 {
		t.Fatalf("got %d events from %d, next %d, lost %d", len(events), events[0].Seq, next, lost)
	}
	events, next, _ = ring.Wait(context.Background(), 9, 0, 2)
	if len(events) != 2 || events[0].Seq != 10 || next != 11 {
		t.Fatalf("since 9 limit 2: %v next %d", events, next)
	}
	events, next, _ = ring.Wait(context.Background(), 12, 0, 10)
	if len(events) != 0 || next != 12 {
		t.Fatalf("nothing new: %v next %d", events, next)
	}
}

func TestRingLongPollWakesOnAppend(t *testing.T) {
	ring := NewRing(10)
	go func() {
		time.Sleep(50 * time.Millisecond)
		ring.Append(Event{Type: "start"})
	}()
	t0 := time.Now()
	events, next, _ := ring.Wait(context.Background(), 0, 5*time.Second, 10)
	if len(events) != 1 || next != 1 || time.Since(t0) > 2*time.Second {
		t.Fatalf("got %v next %d after %v", events, next, time.Since(t0))
	}
	t0 = time.Now()
	events, _, _ = ring.Wait(context.Background(), 1, 100*time.Millisecond, 10)
	if len(events) != 0 || time.Since(t0) < 90*time.Millisecond {
		t.Fatalf("empty wait returned %v after %v", events, time.Since(t0))
	}
}

// -- the proxy end to end (in-process upstream) -------------------------------------------------------------

type store struct {
	mu      sync.Mutex
	objects map[string][]byte
	hosts   []string
	seen    int
}

func (s *store) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen++
	s.hosts = append(s.hosts, r.Host)
	switch r.Method {
	case "PUT":
		body, _ := io.ReadAll(r.Body)
		s.objects[r.URL.Path] = body
		w.Header().Set("ETag", `"e"`)
	case "GET":
		body, ok := s.objects[r.URL.Path]
		if !ok {
			w.WriteHeader(404)
			return
		}
		w.Write(body)
	}
}

type rig struct {
	upstream *store
	proxy    *Proxy
	server   *httptest.Server
	api      *httptest.Server
}

func newRig(t *testing.T) *rig {
	t.Helper()
	st := &store{objects: map[string][]byte{}}
	up := httptest.NewServer(st)
	target, _ := url.Parse(up.URL)
	logger := log.New(io.Discard, "", 0)
	proxy := NewProxy(target, NewRules(1), NewRing(1000), logger, false, nil)
	server := httptest.NewServer(proxy)
	api := httptest.NewServer((&API{proxy: proxy, logger: logger}).Handler())
	t.Cleanup(func() {
		proxy.holds.ReleaseAll(Release{Mode: ModeDrop})
		server.Close()
		api.Close()
		up.Close()
	})
	return &rig{st, proxy, server, api}
}

func (g *rig) call(t *testing.T, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, g.api.URL+path, strings.NewReader(body))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	json.NewDecoder(res.Body).Decode(&out)
	return res.StatusCode, out
}

func (g *rig) rule(t *testing.T, text string) string {
	t.Helper()
	status, out := g.call(t, "POST", "/rules", text)
	if status != http.StatusCreated {
		t.Fatalf("POST /rules %s: %d %v", text, status, out)
	}
	return out["id"].(string)
}

// raw sends one request on its own connection and reads the answer; err when the connection closed without one.
func (g *rig) raw(t *testing.T, method, path, body string) (*http.Response, error) {
	t.Helper()
	conn, err := net.Dial("tcp", g.server.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	req, _ := http.NewRequest(method, "http://signed-host.example:9000"+path, strings.NewReader(body))
	if err := req.Write(conn); err != nil {
		return nil, err
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err == nil {
		io.ReadAll(res.Body)
		res.Body.Close()
	}
	return res, err
}

func (g *rig) objects() map[string]string {
	g.upstream.mu.Lock()
	defer g.upstream.mu.Unlock()
	out := map[string]string{}
	for k, v := range g.upstream.objects {
		out[k] = string(v)
	}
	return out
}

func (g *rig) lastEnd(t *testing.T) Event {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		events, _, _ := g.proxy.events.Wait(context.Background(), 0, 0, 100000)
		for i := len(events) - 1; i >= 0; i-- {
			if events[i].Type == "end" {
				return events[i]
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no end event")
	return Event{}
}

func TestForwardKeepsTheHostHeader(t *testing.T) {
	g := newRig(t)
	res, err := g.raw(t, "PUT", "/chaos/a", "hello")
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("%v %v", res, err)
	}
	if got := g.upstream.hosts[0]; got != "signed-host.example:9000" {
		t.Errorf("upstream saw Host %q", got)
	}
	end := g.lastEnd(t)
	if end.Op != OpPut || end.Status != 200 || end.BytesIn != 5 || end.Outcome != OutForwarded || end.UpstreamStatus != 200 {
		t.Errorf("end event %+v", end)
	}
}

func TestErrorRuleAnswersS3XML(t *testing.T) {
	g := newRig(t)
	g.rule(t, `{"ops": ["PUT"], "key": "^x/state/", "action": "error", "status": 503, "code": "SlowDown"}`)
	res, err := g.raw(t, "PUT", "/chaos/x/state/1", "v")
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 503 || res.Header.Get("Content-Type") != "application/xml" {
		t.Fatalf("status %d content type %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
	if _, ok := g.objects()["/chaos/x/state/1"]; ok {
		t.Error("an errored PUT reached the upstream")
	}
	if res, err := g.raw(t, "PUT", "/chaos/x/other", "v"); err != nil || res.StatusCode != 200 {
		t.Errorf("other key: %v %v", res, err)
	}
}

func TestErrorBodyParses(t *testing.T) {
	g := newRig(t)
	g.rule(t, `{"action": "error", "status": 500}`)
	res, err := http.Get(g.server.URL + "/chaos/k")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var body struct {
		Code, Message, RequestId string
	}
	if err := xml.NewDecoder(res.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 500 || body.Code != "InternalError" || body.Message == "" || body.RequestId == "" ||
		res.Header.Get("X-Amz-Request-Id") != body.RequestId {
		t.Errorf("%d %+v", res.StatusCode, body)
	}
}

func TestDropResponseStoresTheObjectAndClosesTheConnection(t *testing.T) {
	g := newRig(t)
	g.rule(t, `{"ops": ["PUT"], "action": "drop_response", "limit": 1}`)
	if res, err := g.raw(t, "PUT", "/chaos/dropped", "body"); err == nil {
		t.Fatalf("got an answer: %d", res.StatusCode)
	}
	if g.objects()["/chaos/dropped"] != "body" {
		t.Error("the object was not stored")
	}
	end := g.lastEnd(t)
	if end.Outcome != OutDropped || end.Status != 0 || end.UpstreamStatus != 200 {
		t.Errorf("end %+v", end)
	}
	if res, err := g.raw(t, "PUT", "/chaos/dropped", "again"); err != nil || res.StatusCode != 200 {
		t.Errorf("after the limit: %v %v", res, err)
	}
}

func waitHeld(t *testing.T, g *rig, n int) []HeldView {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if views := g.proxy.holds.Views(); len(views) >= n {
			return views
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("fewer than %d held requests", n)
	return nil
}

func TestHoldBeforeThenDropOrForward(t *testing.T) {
	g := newRig(t)
	g.rule(t, `{"ops": ["PUT"], "action": "hold"}`)
	type answer struct {
		res *http.Response
		err error
	}
	answers := make(chan answer, 1)
	go func() { res, err := g.raw(t, "PUT", "/chaos/held", "one"); answers <- answer{res, err} }()
	held := waitHeld(t, g, 1)
	if held[0].Key != "held" || held[0].Op != OpPut || held[0].Phase != "before" {
		t.Errorf("held %+v", held[0])
	}
	if status, out := g.call(t, "POST", "/held/"+held[0].RequestID, `{"mode": "drop"}`); status != 200 {
		t.Fatalf("release: %d %v", status, out)
	}
	if a := <-answers; a.err == nil {
		t.Errorf("a dropped request got an answer %d", a.res.StatusCode)
	}
	if _, ok := g.objects()["/chaos/held"]; ok {
		t.Error("a request held before and dropped reached the upstream")
	}
	go func() { res, err := g.raw(t, "PUT", "/chaos/held", "two"); answers <- answer{res, err} }()
	held = waitHeld(t, g, 1)
	g.call(t, "POST", "/held/"+held[0].RequestID, `{"mode": "forward"}`)
	if a := <-answers; a.err != nil || a.res.StatusCode != 200 {
		t.Errorf("forwarded: %v", a.err)
	}
	if g.objects()["/chaos/held"] != "two" {
		t.Error("the released request did not reach the upstream")
	}
	if status, _ := g.call(t, "POST", "/held/"+held[0].RequestID, `{}`); status != 404 {
		t.Errorf("releasing twice: %d", status)
	}
	end := g.lastEnd(t)
	if end.Outcome != OutReleased || end.Release != ModeForward || end.ReleasedBy != "api" {
		t.Errorf("end %+v", end)
	}
}

func TestHoldAfterErrorsAndClearReleases(t *testing.T) {
	g := newRig(t)
	g.rule(t, `{"ops": ["PUT"], "action": "hold", "phase": "after"}`)
	done := make(chan *http.Response, 2)
	go func() { res, _ := g.raw(t, "PUT", "/chaos/a", "1"); done <- res }()
	held := waitHeld(t, g, 1)
	if g.objects()["/chaos/a"] != "1" {
		t.Error("a request held after was not forwarded first")
	}
	g.call(t, "POST", "/held/"+held[0].RequestID, `{"mode": "error", "status": 500}`)
	if res := <-done; res == nil || res.StatusCode != 500 {
		t.Errorf("released with error: %v", res)
	}
	go func() { res, _ := g.raw(t, "PUT", "/chaos/b", "2"); done <- res }()
	waitHeld(t, g, 1)
	status, out := g.call(t, "DELETE", "/rules", "")
	if status != 200 || out["released"].(float64) != 1 || out["removed"].(float64) != 1 {
		t.Errorf("DELETE /rules: %d %v", status, out)
	}
	if res := <-done; res == nil || res.StatusCode != 200 {
		t.Errorf("released by reset: %v", res)
	}
	if end := g.lastEnd(t); end.ReleasedBy != "reset" {
		t.Errorf("end %+v", end)
	}
}

func TestHoldTimesOut(t *testing.T) {
	g := newRig(t)
	g.rule(t, `{"action": "hold", "hold_timeout_ms": 100, "on_timeout": "error", "status": 503}`)
	t0 := time.Now()
	res, err := g.raw(t, "GET", "/chaos/k", "")
	if err != nil || res.StatusCode != 503 || time.Since(t0) < 100*time.Millisecond {
		t.Fatalf("%v %v after %v", res, err, time.Since(t0))
	}
	if end := g.lastEnd(t); end.ReleasedBy != "timeout" || end.Outcome != OutErrored {
		t.Errorf("end %+v", end)
	}
}

func TestDelayOnlyTheMatchingOperation(t *testing.T) {
	g := newRig(t)
	g.rule(t, `{"ops": ["PUT"], "action": "delay", "delay_ms": 150}`)
	t0 := time.Now()
	g.raw(t, "PUT", "/chaos/k", "v")
	put := time.Since(t0)
	t0 = time.Now()
	g.raw(t, "GET", "/chaos/k", "")
	get := time.Since(t0)
	if put < 150*time.Millisecond || get > 100*time.Millisecond {
		t.Errorf("PUT %v (want >= 150 ms), GET %v (want fast)", put, get)
	}
}

func TestUpstreamDownClosesTheConnection(t *testing.T) {
	g := newRig(t)
	g.proxy.rp.Transport.(*http.Transport).DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		return nil, &net.OpError{Op: "dial", Err: io.ErrUnexpectedEOF}
	}
	if res, err := g.raw(t, "GET", "/chaos/k", ""); err == nil {
		t.Errorf("got an answer %d with the upstream down", res.StatusCode)
	}
	if end := g.lastEnd(t); end.Outcome != OutUpstreamError || end.Error == "" {
		t.Errorf("end %+v", end)
	}
}

func TestAPIRejectsBadRules(t *testing.T) {
	g := newRig(t)
	for _, body := range []string{`{"action": "error", "colour": "red"}`, `not json`, ``, `{"action": "nope"}`,
		`{"action": "error"} {"action": "error"}`} {
		status, out := g.call(t, "POST", "/rules", body)
		message, _ := out["error"].(string)
		if status != 400 || message == "" || strings.Contains(message, "\n") {
			t.Errorf("%q: %d %v", body, status, out)
		}
	}
	if status, _ := g.call(t, "DELETE", "/rules/none", ""); status != 404 {
		t.Errorf("DELETE unknown rule: %d", status)
	}
	if status, _ := g.call(t, "GET", "/events?since=x", ""); status != 400 {
		t.Errorf("bad since: %d", status)
	}
}

func TestEventsAPIPairsStartAndEnd(t *testing.T) {
	g := newRig(t)
	g.raw(t, "PUT", "/chaos/a", "12345")
	status, out := g.call(t, "GET", "/events?since=0&wait_ms=1000", "")
	if status != 200 {
		t.Fatal(status)
	}
	events := out["events"].([]any)
	if len(events) != 2 || out["next"].(float64) != 2 {
		t.Fatalf("%v", out)
	}
	start, end := events[0].(map[string]any), events[1].(map[string]any)
	if start["type"] != "start" || end["type"] != "end" || start["request_id"] != end["request_id"] ||
		end["bytes_in"].(float64) != 5 || end["status"].(float64) != 200 {
		t.Errorf("start %v end %v", start, end)
	}
	t0 := time.Now()
	_, out = g.call(t, "GET", "/events?since=2&wait_ms=150", "")
	if len(out["events"].([]any)) != 0 || time.Since(t0) < 140*time.Millisecond || out["next"].(float64) != 2 {
		t.Errorf("empty long-poll: %v after %v", out, time.Since(t0))
	}
}
