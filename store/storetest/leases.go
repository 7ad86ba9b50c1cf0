// The replicas' role: each replica's boots (its lease owner) and the
// named leases (one Telegram poller among replicas).

package storetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/firstmate/firstmate/agent"
)

func boot(t *testing.T, st Store, replica string, want int64) {
	t.Helper()
	n, err := st.Boot(t.Context(), replica)
	if err != nil || n != want {
		t.Fatalf("Boot(%q) = %d, %v; want %d, nil", replica, n, err, want)
	}
}

func (s suite) testBoot(t *testing.T) {
	st := s.store(t, agent.Retention{})
	other := s.store(t, agent.Retention{})
	boot(t, st, "web-0:8080", 1)
	boot(t, st, "web-0:8080", 2)
	boot(t, st, "web-0:8080", 3)
	boot(t, st, "web-1:8080", 1)
	boot(t, st, "web-0%3A8080", 1)
	boot(t, st, "{web-0}", 1)
	boot(t, other, "web-0:8080", 1)
	wantErr(t, "Boot of an empty replica name", errOf(st.Boot(t.Context(), "")), agent.ErrInvalid)

	// Replicas starting at once get distinct boots.
	const starts = 16
	got := make([]int64, starts)
	errs := make([]error, starts)
	parallel(starts, func(i int) { got[i], errs[i] = st.Boot(t.Context(), "crowd") })
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	for i, n := range got {
		if n != int64(i+1) {
			t.Fatalf("concurrent boots = %v, want 1 to %d", got, starts)
		}
	}
}

func tryLease(t *testing.T, st Store, name, owner string, ttl time.Duration, want bool) {
	t.Helper()
	ok, err := st.TryLease(t.Context(), name, owner, ttl)
	if err != nil || ok != want {
		t.Fatalf("TryLease(%q, %q) = %v, %v; want %v, nil", name, owner, ok, err, want)
	}
}

func dropLease(t *testing.T, st Store, name, owner string) {
	t.Helper()
	if err := st.DropLease(t.Context(), name, owner); err != nil {
		t.Fatalf("DropLease(%q, %q): %v", name, owner, err)
	}
}

func (s suite) testNamedLease(t *testing.T) {
	const ttl = 500 * time.Millisecond
	st := s.store(t, agent.Retention{})
	ctx := t.Context()
	tryLease(t, st, "telegram", "a", ttl, true)
	tryLease(t, st, "telegram", "b", minute, false)
	tryLease(t, st, "telegram", "a", ttl, true) // renewed
	// Names are apart from each other and from sessions.
	tryLease(t, st, "telegram:2", "b", minute, true)
	tryLease(t, st, threadA.String(), "b", minute, true)
	claim(t, st, threadA, "c", minute)

	time.Sleep(ttl + 300*time.Millisecond)
	tryLease(t, st, "telegram", "b", minute, true)
	tryLease(t, st, "telegram", "a", minute, false)
	// Only the holder drops it.
	dropLease(t, st, "telegram", "a")
	tryLease(t, st, "telegram", "a", minute, false)
	dropLease(t, st, "telegram", "b")
	tryLease(t, st, "telegram", "a", minute, true)
	dropLease(t, st, "nothing", "a")

	for _, tc := range []struct {
		what string
		err  error
	}{
		{"TryLease without a name", errOf(st.TryLease(ctx, "", "a", minute))},
		{"TryLease without an owner", errOf(st.TryLease(ctx, "n", "", minute))},
		{"TryLease with a zero ttl", errOf(st.TryLease(ctx, "n", "a", 0))},
		{"DropLease without a name", st.DropLease(ctx, "", "a")},
		{"DropLease without an owner", st.DropLease(ctx, "n", "")},
	} {
		wantErr(t, tc.what, tc.err, agent.ErrInvalid)
	}
	tryLease(t, st, "n", "b", minute, true)

	// One winner among many.
	const owners = 16
	won := make([]bool, owners)
	errs := make([]error, owners)
	parallel(owners, func(i int) { won[i], errs[i] = st.TryLease(ctx, "race", fmt.Sprint(i), minute) })
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if n := len(slices.DeleteFunc(won, func(w bool) bool { return !w })); n != 1 {
		t.Fatalf("%d owners took the lease, want 1", n)
	}
}
