package telegram

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/firstmate/firstmate/adapters"
	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/tools"
)

// Download implements agent.Downloader: getFile, then the file from
// {TELEGRAM_API_URL}/file/bot<token>/<path> (the library's File.Link
// ignores a custom server), into the workspace under uploads/.
func (a *Adapter) Download(ctx context.Context, f agent.File, ws *tools.Workspace) (string, error) {
	max := a.cfg.MaxFileBytes
	if err := adapters.CheckSize(f, max, "a bot can download from Telegram; send a smaller file or a link"); err != nil {
		return "", err
	}
	var file struct {
		FilePath string `json:"file_path"`
		FileSize int64  `json:"file_size"`
	}
	if err := a.call(ctx, "getFile", tgbotapi.Params{"file_id": f.ID}, &file); err != nil {
		return "", fmt.Errorf("getFile: %w", err)
	}
	if file.FilePath == "" {
		return "", errors.New("no file path from Telegram (the file may be over its 20 MB bot limit)")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.root+"/file/bot"+a.cfg.Token+"/"+file.FilePath, nil)
	if err != nil {
		return "", a.scrub(err)
	}
	dest, err := adapters.Download(a.http, req, ws, f.Name, max, nil)
	return dest, a.scrub(err)
}
