package main

import (
	"context"
	"errors"
	"io"
)

// errNothingToServe names what to set when no platform is configured.
var errNothingToServe = errors.New(`nothing to serve: no platform is configured.
  Slack:    set SLACK_BOT_TOKEN and SLACK_APP_TOKEN (Socket Mode), or SLACK_BOT_TOKEN and SLACK_SIGNING_SECRET (HTTP events)
  Telegram: set TELEGRAM_BOT_TOKEN
  Or talk to firstmate in this terminal: firstmate chat`)

// errPlatformPending is returned while the configured platform's adapter
// is not part of this build.
var errPlatformPending = errors.New("the Slack and Telegram adapters are not part of this version yet; use `firstmate chat` for now")

func cmdServe(ctx context.Context, args []string, _, stderr io.Writer) error {
	fs, cfgPath := commonFlags("serve", stderr)
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		return err
	}
	if !cfg.Slack.Enabled() && !cfg.Telegram.Enabled() {
		return errNothingToServe
	}
	return errPlatformPending
}
