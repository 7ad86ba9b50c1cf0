package shell

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/firstmate/firstmate/tools"
	"github.com/firstmate/firstmate/tools/sandbox"
)

// The workspace quota is a limit, not a sweep: no command pays for a walk
// of the whole tree. Each workspace has a running figure (bytes and files),
// measured by one walk at its first use after start, so a workspace that is
// already over its quota is refused growth at its first command. Between
// walks the figure is kept current from the filesystem that holds it
// (statfs: used blocks and used inodes): what the filesystem gained from
// one sample to the next, added up and never offset by what it lost, is an
// upper bound on what the workspace gained, unless something else freed
// space in the same few milliseconds as the workspace grew. (Offsetting
// losses is no bound at all: a test run that deleted 36 MB elsewhere hid
// 60 MB written here.) The estimate, figure + gains, is what commands are
// admitted on (RLIMIT_FSIZE = the bytes left; over quota, no file may grow
// or be created), and while commands and jobs run it is sampled at an
// interval that shortens as the workspace nears a cap; the tree is walked
// again only when the estimate crosses a cap (to tell this workspace's
// growth from the rest of the filesystem's), when the estimate has grown
// uncertain, or every few minutes.

// Usage is what a workspace holds: the space its files take (allocated
// blocks, as du counts them, a hard-linked file once) and how many entries
// it has (files, directories, links: anything that takes an inode).
type Usage struct {
	Bytes int64
	Files int64
}

func (u Usage) over(c Usage) bool { return u.Bytes > c.Bytes || u.Files > c.Files }

func (u Usage) minus(v Usage) Usage { return Usage{u.Bytes - v.Bytes, u.Files - v.Files} }

// noStop is a walk's stop that never stops it.
var noStop = Usage{math.MaxInt64, math.MaxInt64}

// fsUse is what the whole filesystem holding a workspace has in use.
type fsUse struct {
	Usage
	// FilesKnown: the filesystem counts inodes (btrfs, for one, reports
	// none, and then only walks count files).
	FilesKnown bool
}

// growth is what the filesystem gained from base to u, dimension by
// dimension, never negative: space freed elsewhere says nothing about
// this workspace.
func (u fsUse) growth(base fsUse) Usage {
	g := Usage{Bytes: max(0, u.Bytes-base.Bytes)}
	if u.FilesKnown && base.FilesKnown {
		g.Files = max(0, u.Files-base.Files)
	}
	return g
}

// quotaTiming says how often the running figure is checked and measured.
type quotaTiming struct {
	// While a command or job runs, the filesystem is sampled every
	// minEvery to maxEvery: the time the assumed fastest growth (byteRate
	// bytes, fileRate files a second) takes to use up what is left.
	minEvery, maxEvery time.Duration
	byteRate, fileRate float64
	// A figure older than recheck is measured again; blindRecheck where
	// the filesystem counts no inodes. Over quota, what others write to
	// the filesystem can hide what a command freed; frozenRecheck bounds
	// how long a workspace cleaned up meanwhile stays frozen.
	recheck, blindRecheck, frozenRecheck time.Duration
	// Walks made while commands run cost 4 times their time, paid back as
	// time passes; one may start while less than walkBurst is owed. A
	// workspace held at a cap by a busy filesystem then spends at most a
	// fifth of a core on walking, and one nearing it is walked at once.
	walkBurst time.Duration
	// Frozen commands on a host that cannot forbid creating files are
	// stopped once the workspace grows by more than this.
	frozenSlack Usage
	// Growth of the filesystem this small never makes a command's
	// admission walk: near a cap, others' writing would otherwise cost a
	// walk per command.
	uncertain Usage
}

var defaultTiming = quotaTiming{
	minEvery: 2 * time.Millisecond, maxEvery: 250 * time.Millisecond,
	byteRate: 2 << 30, fileRate: 200_000,
	recheck: 5 * time.Minute, blindRecheck: 10 * time.Second, frozenRecheck: 30 * time.Second,
	walkBurst:   50 * time.Millisecond,
	frozenSlack: Usage{Bytes: 1 << 20, Files: 64},
	uncertain:   Usage{Bytes: 1 << 20, Files: 1000},
}

// ErrOverQuota is why a job is refused: its workspace is full.
var ErrOverQuota = errors.New("the workspace is over its quota")

// quota keeps the running figure of every workspace it has seen.
type quota struct {
	caps Usage
	// noCreate: the sandbox can forbid creating files (Landlock); without
	// it a frozen command is stopped when the workspace grows instead.
	noCreate bool
	timing   quotaTiming
	statfs   func(dir string) (fsUse, error)
	walk     func(dir string, stop Usage) (Usage, error)

	walks atomic.Int64 // walks done: tests and benchmarks read it

	mu sync.Mutex
	ws map[string]*wsQuota
}

func newQuota(caps Usage, noCreate bool) *quota {
	return &quota{caps: caps, noCreate: noCreate, timing: defaultTiming, statfs: statFS, walk: walkTree, ws: map[string]*wsQuota{}}
}

// wsQuota is one workspace's running figure. Its mutex is held through a
// walk: concurrent commands of one workspace wait for it rather than walk
// the same tree twice.
type wsQuota struct {
	dir string

	mu     sync.Mutex
	walked time.Time // when the last walk ended; zero: never
	paidAt time.Time // when the walks' cost is paid back (see walkBurst)
	fig    Usage     // what the last walk counted
	exact  bool      // it counted everything (not stopped past a limit)
	err    error     // the last walk failed: the workspace counts as over
	base   fsUse     // the filesystem just before that walk
	// gains adds up what the filesystem gained between samples since the
	// walk; prev is the last sample. tracked: no sample failed since.
	gains   Usage
	prev    fsUse
	tracked bool
	last    fsUse // the filesystem at the last admission
	lastOK  bool
}

func (q *quota) workspace(dir string) *wsQuota {
	q.mu.Lock()
	defer q.mu.Unlock()
	w := q.ws[dir]
	if w == nil {
		w = &wsQuota{dir: dir}
		q.ws[dir] = w
	}
	return w
}

// observe adds what the filesystem gained since the last sample.
func (w *wsQuota) observe(fs fsUse, fsOK bool) {
	if w.tracked && fsOK {
		g := fs.growth(w.prev)
		w.gains = Usage{w.gains.Bytes + g.Bytes, w.gains.Files + g.Files}
	}
	w.prev, w.tracked = fs, w.tracked && fsOK
}

// estimate is the most the workspace can hold now; ok is false when the
// figure cannot be brought forward (a sample failed since the walk).
func (w *wsQuota) estimate() (est Usage, ok bool) {
	return Usage{w.fig.Bytes + w.gains.Bytes, w.fig.Files + w.gains.Files}, w.tracked
}

// measure walks the workspace, stopping once past stop. fs is the sample
// taken before the walk began: what is written during the walk either is
// counted by it or shows as growth after it, so the estimate stays an upper
// bound.
func (q *quota) measure(w *wsQuota, fs fsUse, fsOK bool, stop Usage) {
	t0 := time.Now()
	u, err := q.walk(w.dir, stop)
	q.walks.Add(1)
	w.walked = time.Now()
	if w.paidAt.Before(w.walked) {
		w.paidAt = w.walked
	}
	w.paidAt = w.paidAt.Add(4 * w.walked.Sub(t0))
	w.err = err
	if err == nil {
		w.fig, w.exact = u, !u.over(stop)
		w.base, w.prev, w.tracked, w.gains = fs, fs, fsOK, Usage{}
	}
}

func (q *quota) recheckFor(fs fsUse) time.Duration {
	if fs.FilesKnown {
		return q.timing.recheck
	}
	return q.timing.blindRecheck
}

func (q *quota) mayWalk(w *wsQuota, now time.Time) bool {
	return w.paidAt.Sub(now) < q.timing.walkBurst
}

// admission is how a command may start, and what stops it.
type admission struct {
	w      *wsQuota
	est    Usage // the estimate when it started
	caps   Usage
	frozen bool  // over quota: no file may grow or be created
	err    error // the workspace could not be measured (it counts as over)
	// noCreate: the sandbox can forbid creating files; without it, a
	// frozen command is policed instead.
	noCreate bool
	// police: the command is watched, and stopped once the workspace goes
	// past limit.
	police bool
	limit  Usage
}

// admit decides how a command in dir may start: a walk only when the
// running figure cannot decide it (first use, a cap crossed, a figure gone
// uncertain or old, or enough freed to bring a full workspace back under).
func (q *quota) admit(dir string) admission {
	w := q.workspace(dir)
	w.mu.Lock()
	defer w.mu.Unlock()
	fs, err := q.statfs(dir)
	fsOK := err == nil
	w.observe(fs, fsOK)
	if q.stale(w, fs, time.Now()) {
		q.measure(w, fs, fsOK, noStop)
	}
	w.last, w.lastOK = fs, fsOK
	est, _ := w.estimate()
	a := admission{w: w, est: est, caps: q.caps, err: w.err, frozen: w.err != nil || est.over(q.caps), noCreate: q.noCreate}
	switch {
	case !a.frozen:
		a.police, a.limit = true, q.caps
	case !q.noCreate:
		a.police, a.limit = true, Usage{est.Bytes + q.timing.frozenSlack.Bytes, est.Files + q.timing.frozenSlack.Files}
	}
	return a
}

// stale says whether the running figure must be measured again before a
// command is admitted.
func (q *quota) stale(w *wsQuota, fs fsUse, now time.Time) bool {
	est, tracked := w.estimate()
	if w.walked.IsZero() || w.err != nil || !w.exact || !tracked || now.Sub(w.walked) >= q.recheckFor(fs) {
		return true
	}
	if w.fig.over(q.caps) {
		// Only what was freed can bring it back under: since the walk, or
		// since the last look (a shorter time for others' writing to hide
		// it in).
		return now.Sub(w.walked) >= q.timing.frozenRecheck || q.freedEnough(w, w.base, fs) || w.lastOK && q.freedEnough(w, w.last, fs)
	}
	if est.over(q.caps) {
		return true
	}
	// The estimate is an upper bound: once the filesystem's growth has
	// eaten a quarter of what was left, the bytes left (the command's
	// largest file) are worth measuring again.
	g, left := est.minus(w.fig), q.caps.minus(w.fig)
	return g.Bytes > max(left.Bytes/4, q.timing.uncertain.Bytes) || g.Files > max(left.Files/4, q.timing.uncertain.Files)
}

// freedEnough says whether the filesystem freed, since from, at least the
// excess over each cap the workspace is over.
func (q *quota) freedEnough(w *wsQuota, from, fs fsUse) bool {
	freed := from.Usage.minus(fs.Usage)
	if w.fig.Bytes > q.caps.Bytes && freed.Bytes < w.fig.Bytes-q.caps.Bytes {
		return false
	}
	if w.fig.Files > q.caps.Files && (!fs.FilesKnown || freed.Files < w.fig.Files-q.caps.Files) {
		return false // without inode counts, the blind recheck decides
	}
	return true
}

// apply sets the command's limits from the admission: the largest file it
// may write is the bytes left, and over quota no file may grow or be made.
func (a admission) apply(c *sandbox.Command) {
	if a.frozen {
		c.NoGrow, c.NoCreate = true, a.noCreate
		return
	}
	left := a.caps.Bytes - a.est.Bytes
	if left <= 0 {
		c.NoGrow = true // a FileSize of 0 would mean "the default"
	} else if c.Limits.FileSize <= 0 || c.Limits.FileSize > left {
		c.Limits.FileSize = left
	}
	if a.est.Files >= a.caps.Files {
		c.NoCreate = a.noCreate
	}
}

// guard watches the workspace while an admitted command runs, until done
// is closed; it returns true, at once, when the workspace went past the
// command's limit (the caller kills it). statfs has no way to wait for a
// change, so it is sampled: rarely while there is room, every few
// milliseconds near a cap.
func (q *quota) guard(done <-chan struct{}, a admission) bool {
	if !a.police {
		<-done
		return false
	}
	t := time.NewTimer(q.every(a.limit.minus(a.est), true))
	defer t.Stop()
	for {
		select {
		case <-done:
			return false
		case <-t.C:
		}
		over, next := q.sample(a)
		if over {
			return true
		}
		t.Reset(next)
	}
}

// sample brings the figure forward; when the estimate is past the limit it
// walks, stopping as soon as the walk itself is past it, to tell this
// workspace's growth from the rest of the filesystem's.
func (q *quota) sample(a admission) (over bool, next time.Duration) {
	w := a.w
	w.mu.Lock()
	defer w.mu.Unlock()
	fs, err := q.statfs(w.dir)
	fsOK := err == nil
	w.observe(fs, fsOK)
	now := time.Now()
	est, known := w.estimate()
	if (!known || est.over(a.limit) || now.Sub(w.walked) >= q.recheckFor(fs)) && q.mayWalk(w, now) {
		q.measure(w, fs, fsOK, a.limit)
		est = w.fig
	}
	if w.err != nil || w.fig.over(a.limit) {
		return true, 0
	}
	return false, q.every(a.limit.minus(est), fs.FilesKnown)
}

// every is how long the assumed fastest growth takes to use up left.
func (q *quota) every(left Usage, filesKnown bool) time.Duration {
	t := q.timing
	secs := float64(max(0, left.Bytes)) / t.byteRate
	if filesKnown {
		secs = min(secs, float64(max(0, left.Files))/t.fileRate)
	}
	return min(max(time.Duration(secs*float64(time.Second)), t.minEvery), t.maxEvery)
}

// frozenNote says why a command could not grow or create files.
func (a admission) frozenNote() string {
	if a.err != nil {
		return fmt.Sprintf("The workspace could not be measured (%v), so this command could not grow or create any file.", a.err)
	}
	return fmt.Sprintf("The workspace holds %s, so this command could not grow or create any file; delete files to get under it.", overText(a.est, a.caps))
}

// afterNote says how the workspace stands after a command, or "" when
// nothing changed that the model needs to hear of.
func afterNote(before, after admission) string {
	switch {
	case after.frozen && before.frozen:
		return before.frozenNote()
	case after.err != nil:
		return after.frozenNote()
	case after.frozen:
		return fmt.Sprintf("The workspace now holds %s: until files are deleted, commands cannot grow or create any file.", overText(after.est, after.caps))
	case before.frozen:
		return "The workspace is back under its quota; files can grow again."
	}
	return ""
}

// overText is "2.9 MiB, over its 1 MiB quota" and/or "2,345 files, over
// its 2,000-file quota": the caps u is over.
func overText(u, caps Usage) string {
	var parts []string
	if u.Bytes > caps.Bytes {
		parts = append(parts, fmt.Sprintf("%s, over its %s quota", tools.FormatSize(u.Bytes), tools.FormatSize(caps.Bytes)))
	}
	if u.Files > caps.Files {
		parts = append(parts, fmt.Sprintf("%s files, over its %s-file quota", thousands(u.Files), thousands(caps.Files)))
	}
	if len(parts) == 0 {
		return "as much as its quota allows"
	}
	return strings.Join(parts, ", and ")
}

// thousands is n with commas: 100,000.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		s = "-" + s
	}
	return s
}

// enforcement describes, for an operator, how the quota holds for
// workspaces under dir.
func (q *quota) enforcement(dir string, kind sandbox.Kind) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s and %s files per workspace: a running figure per workspace (one walk at first use), brought forward by statfs", tools.FormatSize(q.caps.Bytes), thousands(q.caps.Files))
	fs, name, err := statFSUp(dir)
	switch {
	case err != nil:
		fmt.Fprintf(&b, " (which fails here: %v; every command walks the workspace instead)", err)
	case !fs.FilesKnown:
		fmt.Fprintf(&b, " of %s, which counts no inodes (files are counted by a walk every %s while commands run)", name, q.timing.blindRecheck)
	default:
		fmt.Fprintf(&b, " of %s", name)
	}
	fmt.Fprintf(&b, ", sampled every %s–%s while commands and jobs run; a walk only when the estimate crosses a cap, or every %s; RLIMIT_FSIZE is the bytes left; a command or job that takes the workspace over is killed",
		q.timing.minEvery, q.timing.maxEvery, q.timing.recheck)
	switch {
	case kind == sandbox.KindHost:
		b.WriteString("; commands run on the host, so over quota nothing stops files being created or grown: a command that grows the workspace further is killed when it is seen")
	case q.noCreate:
		b.WriteString("; over quota, files cannot grow and Landlock forbids creating any")
	default:
		b.WriteString("; over quota files cannot grow, but without Landlock nothing forbids creating files: a command that does is killed when it is seen")
	}
	b.WriteString("; project quotas are not used")
	return b.String()
}
