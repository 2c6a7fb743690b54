-- A headless Neovim (0.7.2: vim.lsp.start_client + vim.lsp.buf_attach_client; there is no
-- vim.lsp.start) as an independent LSP client of the Agent Lab server. Reads a JSON spec
-- from $AGENT_LAB_NVIM_SPEC:
--   { "cmd": [...], "root": DIR, "out": FILE,
--     "files": [ { "path": FILE, "hovers": [ [line, character], ... ] } ] }
-- opens each file, attaches the server, waits for its diagnostics, asks for the hovers and
-- writes what it saw to "out": the raw publishDiagnostics params (UTF-16 positions), what
-- vim.diagnostic made of them (byte columns) and each hover's markdown.

local function run()
  local spec = vim.fn.json_decode(table.concat(vim.fn.readfile(os.getenv('AGENT_LAB_NVIM_SPEC')), '\n'))
  local results = { nvim = vim.version(), files = {} }
  local raw = {}
  local client_id = vim.lsp.start_client({
    name = 'agent-lab',
    cmd = spec.cmd,
    root_dir = spec.root,
    handlers = {
      ['textDocument/publishDiagnostics'] = function(err, result, ctx, config)
        raw[result.uri] = result
        return vim.lsp.diagnostic.on_publish_diagnostics(err, result, ctx, config)
      end,
    },
    on_exit = function(code, signal)
      results.exit = { code = code, signal = signal }
    end,
  })
  assert(client_id, 'vim.lsp.start_client returned nil')
  for _, f in ipairs(spec.files) do
    vim.cmd('edit ' .. vim.fn.fnameescape(f.path))
    local bufnr = vim.api.nvim_get_current_buf()
    assert(vim.lsp.buf_attach_client(bufnr, client_id), 'buf_attach_client failed')
    local uri = vim.uri_from_bufnr(bufnr)
    local ok = vim.wait(30000, function()
      return raw[uri] ~= nil
    end, 20)
    local entry = {
      path = f.path,
      uri = uri,
      got_diagnostics = ok,
      raw = raw[uri] or vim.NIL,
      diagnostics = vim.diagnostic.get(bufnr),
      hovers = {},
    }
    for _, pos in ipairs(f.hovers) do
      local params = { textDocument = { uri = uri }, position = { line = pos[1], character = pos[2] } }
      local resp = vim.lsp.buf_request_sync(bufnr, 'textDocument/hover', params, 10000)
      local value = vim.NIL
      if resp then
        for _, r in pairs(resp) do
          if r.result and r.result.contents then
            value = r.result.contents.value or r.result.contents
          end
        end
      end
      table.insert(entry.hovers, { position = pos, value = value })
    end
    -- Strip what json_encode cannot carry.
    for _, d in ipairs(entry.diagnostics) do
      d.user_data = nil
      d.namespace = nil
    end
    table.insert(results.files, entry)
  end
  local client = vim.lsp.get_client_by_id(client_id)
  results.client_name = client and client.name or vim.NIL
  vim.lsp.stop_client(client_id)
  vim.wait(5000, function()
    return results.exit ~= nil
  end, 20)
  vim.fn.writefile({ vim.fn.json_encode(results) }, spec.out)
end

local ok, err = pcall(run)
if not ok then
  local out = vim.fn.json_decode(table.concat(vim.fn.readfile(os.getenv('AGENT_LAB_NVIM_SPEC')), '\n')).out
  vim.fn.writefile({ vim.fn.json_encode({ error = tostring(err) }) }, out)
  vim.cmd('cquit 1')
end
vim.cmd('qall!')
