package agent

import (
	"context"
	"slices"
)

// AddCommandForTest adds a command to the registry until restore is called.
func AddCommandForTest(c Command, run func(ctx context.Context, in Inbound) (string, error)) (restore func()) {
	saved := commands
	c.run = func(ctx context.Context, _ *Dispatcher, in Inbound, _ string) (Notice, error) {
		return text(run(ctx, in))
	}
	commands = append(slices.Clone(commands), c)
	return func() { commands = saved }
}

// OpenAttachment is openAttachment, for tests.
var OpenAttachment = openAttachment
