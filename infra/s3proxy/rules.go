package main

// What a request is (classification) and what to do with it (rules). No I/O here: rules_test.go covers it.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Operations a request is classified as.
const (
	OpPut    = "PUT"    // object PUT, multipart part upload included
	OpCopy   = "COPY"   // PUT with x-amz-copy-source (CopyObject, UploadPartCopy)
	OpGet    = "GET"    // object GET
	OpHead   = "HEAD"   // object HEAD
	OpDelete = "DELETE" // object DELETE (abort multipart upload included)
	OpList   = "LIST"   // GET on a bucket listing objects, versions or multipart uploads
	OpPost   = "POST"   // multipart create/complete, DeleteObjects, ...
	OpOther  = "OTHER"  // bucket and service requests: GetBucketLocation, HeadBucket, CreateBucket, ListBuckets, ...
)

var knownOps = map[string]bool{OpPut: true, OpCopy: true, OpGet: true, OpHead: true, OpDelete: true,
	OpList: true, OpPost: true, OpOther: true}

// Query parameters recorded in events (and the LIST prefix a rule's key matches).
var keptQuery = []string{"uploads", "uploadId", "partNumber", "list-type", "prefix", "delimiter", "delete",
	"versionId", "continuation-token", "start-after", "marker", "max-keys"}

// A GET on a bucket whose query parameters are all in this set is a listing.
var listParams = map[string]bool{"list-type": true, "prefix": true, "delimiter": true, "marker": true,
	"max-keys": true, "continuation-token": true, "start-after": true, "encoding-type": true, "fetch-owner": true,
	"uploads": true, "versions": true, "key-marker": true, "upload-id-marker": true, "version-id-marker": true,
	"max-uploads": true, "metadata": true, "allow-unordered": true}

// Request is what rules match on and what events record about one S3 request (path-style addressing).
type Request struct {
	Op           string
	Method       string
	Bucket       string
	Key          string
	SourceBucket string
	SourceKey    string
	Query        map[string]string
}

// Classify parses a path-style S3 request: /<bucket>/<key>; path is the URL-decoded path.
func Classify(method, path, rawQuery, copySource string) Request {
	bucket, key, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	values, _ := url.ParseQuery(rawQuery)
	r := Request{Method: method, Bucket: bucket, Key: key, Query: map[string]string{}}
	for _, name := range keptQuery {
		if vs, ok := values[name]; ok {
			r.Query[name] = ""
			if len(vs) > 0 {
				r.Query[name] = vs[0]
			}
		}
	}
	if copySource != "" {
		r.SourceBucket, r.SourceKey = ParseCopySource(copySource)
	}
	switch {
	case bucket == "":
		r.Op = OpOther
	case method == "POST":
		r.Op = OpPost
	case key == "":
		r.Op = OpOther
		if method == "GET" && isListing(values) {
			r.Op = OpList
		}
	case method == "PUT" && copySource != "":
		r.Op = OpCopy
	case method == "PUT":
		r.Op = OpPut
	case method == "GET":
		r.Op = OpGet
	case method == "HEAD":
		r.Op = OpHead
	case method == "DELETE":
		r.Op = OpDelete
	default:
		r.Op = OpOther
	}
	return r
}

func isListing(values url.Values) bool {
	for name := range values {
		if !listParams[name] {
			return false
		}
	}
	return true
}

// ParseCopySource splits an x-amz-copy-source header ("/bucket/key?versionId=..", URL-encoded) into bucket and key.
func ParseCopySource(header string) (bucket, key string) {
	if i := strings.IndexByte(header, '?'); i >= 0 {
		header = header[:i] // an encoded key cannot hold a raw '?': this is the versionId
	}
	if decoded, err := url.PathUnescape(header); err == nil {
		header = decoded
	}
	bucket, key, _ = strings.Cut(strings.TrimPrefix(header, "/"), "/")
	return bucket, key
}

// -- rules ------------------------------------------------------------------------------------------------

// Actions.
const (
	ActDelay = "delay"
	ActError = "error"
	ActDrop  = "drop_response"
	ActHold  = "hold"
)

// Release modes of a held request (and what a hold does when it times out).
const (
	ModeForward = "forward"
	ModeDrop    = "drop"
	ModeError   = "error"
)

const defaultHoldTimeoutMs = 60_000

// RuleSpec is a rule as the API takes and shows it. After Normalize every optional field has its value.
type RuleSpec struct {
	ID            string   `json:"id"`
	Ops           []string `json:"ops"`
	Bucket        string   `json:"bucket"`
	Key           string   `json:"key"`
	SourceKey     string   `json:"source_key"`
	Action        string   `json:"action"`
	Phase         string   `json:"phase"`
	DelayMs       int      `json:"delay_ms"`
	JitterMs      int      `json:"jitter_ms"`
	Status        int      `json:"status"`
	Code          string   `json:"code"`
	Message       string   `json:"message"`
	HoldTimeoutMs int      `json:"hold_timeout_ms"`
	OnTimeout     string   `json:"on_timeout"`
	Probability   *float64 `json:"probability"`
	Limit         int      `json:"limit"`
	Enabled       *bool    `json:"enabled"`
}

var idPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// DefaultCode is the S3 error code an injected status answers with when the rule names none.
func DefaultCode(status int) string {
	switch status {
	case 500:
		return "InternalError"
	case 503:
		return "SlowDown"
	case 403:
		return "AccessDenied"
	case 404:
		return "NoSuchKey"
	case 400:
		return "BadRequest"
	}
	return "InjectedError"
}

// DefaultMessage is what AWS says with the code (or a note that the error was injected).
func DefaultMessage(code string) string {
	switch code {
	case "SlowDown":
		return "Please reduce your request rate."
	case "InternalError":
		return "We encountered an internal error. Please try again."
	case "ServiceUnavailable":
		return "Please reduce your request rate."
	case "AccessDenied":
		return "Access Denied"
	case "NoSuchKey":
		return "The specified key does not exist."
	}
	return "Error injected by s3proxy."
}

// Normalize validates a rule and fills in its defaults; the error is one line naming the field.
func (s *RuleSpec) Normalize() error {
	s.Action = strings.ToLower(strings.TrimSpace(s.Action))
	switch s.Action {
	case ActDelay, ActError, ActDrop, ActHold:
	case "":
		return fmt.Errorf("action is required (delay, error, drop_response, hold)")
	default:
		return fmt.Errorf("action %q is not one of delay, error, drop_response, hold", s.Action)
	}
	if s.ID != "" && !idPattern.MatchString(s.ID) {
		return fmt.Errorf("id %q must be 1-64 characters of A-Z a-z 0-9 . _ -", s.ID)
	}
	ops := []string{}
	seen := map[string]bool{}
	for _, op := range s.Ops {
		op = strings.ToUpper(strings.TrimSpace(op))
		if !knownOps[op] {
			return fmt.Errorf("op %q is not one of PUT, COPY, GET, HEAD, DELETE, LIST, POST, OTHER", op)
		}
		if !seen[op] {
			seen[op] = true
			ops = append(ops, op)
		}
	}
	s.Ops = ops
	for name, pattern := range map[string]string{"bucket": s.Bucket, "key": s.Key, "source_key": s.SourceKey} {
		if _, err := regexp.Compile(pattern); err != nil {
			return fmt.Errorf("%s is not a valid Go regexp: %v", name, oneLine(err.Error()))
		}
	}
	switch s.Phase = strings.ToLower(s.Phase); s.Phase {
	case "":
		s.Phase = "before"
		if s.Action == ActDrop {
			s.Phase = "after" // forwarded first, so the object is stored; then the answer is lost
		}
	case "before", "after":
	default:
		return fmt.Errorf("phase %q is not before or after", s.Phase)
	}
	if s.Action != ActDelay && (s.DelayMs != 0 || s.JitterMs != 0) {
		return fmt.Errorf("delay_ms and jitter_ms are for action delay, not %s", s.Action)
	}
	if s.Action == ActDelay {
		if s.DelayMs <= 0 {
			return fmt.Errorf("action delay needs delay_ms > 0")
		}
		if s.JitterMs < 0 {
			return fmt.Errorf("jitter_ms must be >= 0")
		}
	}
	if s.Action != ActHold && (s.HoldTimeoutMs != 0 || s.OnTimeout != "") {
		return fmt.Errorf("hold_timeout_ms and on_timeout are for action hold, not %s", s.Action)
	}
	if s.Action == ActHold {
		if s.HoldTimeoutMs == 0 {
			s.HoldTimeoutMs = defaultHoldTimeoutMs
		}
		if s.HoldTimeoutMs < 0 {
			return fmt.Errorf("hold_timeout_ms must be > 0")
		}
		switch s.OnTimeout = strings.ToLower(s.OnTimeout); s.OnTimeout {
		case "":
			s.OnTimeout = ModeForward
		case ModeForward, ModeDrop, ModeError:
		default:
			return fmt.Errorf("on_timeout %q is not forward, drop or error", s.OnTimeout)
		}
	}
	if s.Action == ActError || s.Action == ActHold { // a hold answers an error when released (or timed out) so
		if s.Status == 0 {
			s.Status = 503
		}
		if s.Status < 400 || s.Status > 599 {
			return fmt.Errorf("status %d is not an HTTP error status (400-599)", s.Status)
		}
		if s.Code == "" {
			s.Code = DefaultCode(s.Status)
		}
		if s.Message == "" {
			s.Message = DefaultMessage(s.Code)
		}
	} else if s.Status != 0 || s.Code != "" || s.Message != "" {
		return fmt.Errorf("status, code and message are for actions error and hold, not %s", s.Action)
	}
	if strings.ContainsAny(s.Code, "<>&\r\n") {
		return fmt.Errorf("code %q must not contain markup or line breaks", s.Code)
	}
	if s.Probability == nil {
		one := 1.0
		s.Probability = &one
	}
	if p := *s.Probability; math.IsNaN(p) || p < 0 || p > 1 {
		return fmt.Errorf("probability %v is not between 0 and 1", p)
	}
	if s.Limit < 0 {
		return fmt.Errorf("limit must be >= 0 (0: unlimited)")
	}
	if s.Enabled == nil {
		yes := true
		s.Enabled = &yes
	}
	return nil
}

func oneLine(text string) string {
	return strings.Join(strings.Fields(text), " ")
}

// Rule is a normalized rule with its compiled patterns and counters.
type Rule struct {
	Spec    RuleSpec
	ops     map[string]bool
	bucket  *regexp.Regexp
	key     *regexp.Regexp
	source  *regexp.Regexp
	Matched int64 // requests it matched
	Applied int64 // requests it acted on (after limit and probability)
}

func compile(pattern string) *regexp.Regexp {
	if pattern == "" {
		return nil
	}
	return regexp.MustCompile(pattern) // Normalize checked it
}

func newRule(spec RuleSpec) *Rule {
	r := &Rule{Spec: spec, ops: map[string]bool{}, bucket: compile(spec.Bucket), key: compile(spec.Key),
		source: compile(spec.SourceKey)}
	for _, op := range spec.Ops {
		r.ops[op] = true
	}
	return r
}

// Matches says whether the rule's filters all hold for the request (not whether it acts: see Rules.Pick).
// `key` matches the object key; on a LIST, the listing's prefix. `source_key` matches only COPYs' source key.
func (r *Rule) Matches(q *Request) bool {
	if !*r.Spec.Enabled {
		return false
	}
	if len(r.ops) > 0 && !r.ops[q.Op] {
		return false
	}
	if r.bucket != nil && !r.bucket.MatchString(q.Bucket) {
		return false
	}
	if r.key != nil {
		target := q.Key
		if q.Op == OpList {
			target = q.Query["prefix"]
		}
		if !r.key.MatchString(target) {
			return false
		}
	}
	if r.source != nil && (q.Op != OpCopy || !r.source.MatchString(q.SourceKey)) {
		return false
	}
	return true
}

// RuleView is a rule as GET /rules shows it.
type RuleView struct {
	RuleSpec
	Matched int64 `json:"matched"`
	Applied int64 `json:"applied"`
}

// Rules is the ordered rule list and the seeded random source its probabilities and jitter draw from.
type Rules struct {
	mu     sync.Mutex
	list   []*Rule
	rng    *rand.Rand
	nextID int
}

func NewRules(seed uint64) *Rules {
	return &Rules{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// Add validates, appends and returns the rule's id.
func (s *Rules) Add(spec RuleSpec) (RuleSpec, error) {
	if err := spec.Normalize(); err != nil {
		return spec, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if spec.ID == "" {
		for {
			s.nextID++
			spec.ID = "r" + strconv.Itoa(s.nextID)
			if s.indexLocked(spec.ID) < 0 {
				break
			}
		}
	} else if s.indexLocked(spec.ID) >= 0 {
		return spec, fmt.Errorf("a rule with id %q exists; remove it first or choose another id", spec.ID)
	}
	s.list = append(s.list, newRule(spec))
	return spec, nil
}

func (s *Rules) indexLocked(id string) int {
	for i, r := range s.list {
		if r.Spec.ID == id {
			return i
		}
	}
	return -1
}

// Remove deletes one rule; false if there is none with that id.
func (s *Rules) Remove(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := s.indexLocked(id)
	if i < 0 {
		return false
	}
	s.list = append(s.list[:i], s.list[i+1:]...)
	return true
}

// Clear removes every rule and returns how many there were.
func (s *Rules) Clear() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.list)
	s.list = nil
	return n
}

func (s *Rules) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.list)
}

func (s *Rules) Views() []RuleView {
	s.mu.Lock()
	defer s.mu.Unlock()
	views := make([]RuleView, 0, len(s.list))
	for _, r := range s.list {
		views = append(views, RuleView{RuleSpec: r.Spec, Matched: r.Matched, Applied: r.Applied})
	}
	return views
}

// Pick returns the first rule, in order, that matches the request and acts on it: its limit is not used up
// and its probability draw succeeds. A matching rule that does not act lets the next ones try. nil: none acts.
func (s *Rules) Pick(q *Request) *RuleSpec {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.list {
		if !r.Matches(q) {
			continue
		}
		r.Matched++
		if r.Spec.Limit > 0 && r.Applied >= int64(r.Spec.Limit) {
			continue
		}
		if p := *r.Spec.Probability; p < 1 && s.rng.Float64() >= p {
			continue
		}
		r.Applied++
		spec := r.Spec
		return &spec
	}
	return nil
}

// Delay draws a delay rule's wait: delay_ms ± jitter_ms (uniform), never negative.
func (s *Rules) Delay(spec *RuleSpec) time.Duration {
	ms := float64(spec.DelayMs)
	if spec.JitterMs > 0 {
		s.mu.Lock()
		ms += (s.rng.Float64()*2 - 1) * float64(spec.JitterMs)
		s.mu.Unlock()
	}
	if ms < 0 {
		ms = 0
	}
	return time.Duration(ms * float64(time.Millisecond))
}
