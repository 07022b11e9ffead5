-- What the specs that check the docs read in a markdown file: its fenced code
-- blocks and its inline code spans, each with the line it starts on, so that
-- a failure names file:line.
local M = {}

local function read(path)
  local f = assert(io.open(path, "rb"), "cannot read " .. path)
  local text = f:read("a")
  f:close()
  return text
end
M.read = read

-- The lines of a file, in order.
function M.lines(path)
  local lines = {}
  for line in (read(path) .. "\n"):gmatch("([^\n]*)\n") do lines[#lines + 1] = line end
  if lines[#lines] == "" then lines[#lines] = nil end
  return lines
end

-- Splits a file into its fenced code blocks and the prose between them.
-- Returns blocks ({lang =, code =, line = first line of the code,
-- prose_before = the paragraph just above the fence, joined}) and prose (a list of {line =, text =}
-- for the lines outside any block).
local function split(path)
  local blocks, prose = {}, {}
  local open
  local para = {}                               -- the prose paragraph last read
  for n, line in ipairs(M.lines(path)) do
    local fence, lang = line:match("^(```+)%s*([%w_+-]*)")
    if open then
      if fence and #fence >= #open.fence and lang == "" then
        blocks[#blocks + 1] = {lang = open.lang, code = table.concat(open.body, "\n") .. "\n",
                               line = open.line + 1, prose_before = open.prose_before}
        open, para = nil, {}
      else
        open.body[#open.body + 1] = line
      end
    elseif fence then
      open = {fence = fence, lang = lang, line = n, body = {},
              prose_before = table.concat(para, " ")}
    else
      prose[#prose + 1] = {line = n, text = line}
      if line:match("^%s*$") then
        para.closed = true
      else
        if para.closed then para = {} end
        para[#para + 1] = line
      end
    end
  end
  assert(not open, ("%s:%d: a code block that is never closed"):format(path, open and open.line or 0))
  return blocks, prose
end

-- The fenced code blocks of a file, optionally of one language ("lua", "c").
function M.blocks(path, lang)
  local all = split(path)
  if not lang then return all end
  local some = {}
  for _, b in ipairs(all) do
    if b.lang == lang then some[#some + 1] = b end
  end
  return some
end

-- The inline code spans of the file's prose, as CommonMark reads them: a run
-- of n backticks up to the next run of exactly n; a span may wrap over lines
-- (joined with one space) but not over a blank line. Returns a list of
-- {text =, line =}.
function M.code_spans(path)
  local _, prose = split(path)
  local spans = {}
  local para, first = {}, nil
  local function flush()
    -- the paragraph's text, each line's start kept to map offsets to lines
    local text, starts = "", {}
    for i, p in ipairs(para) do
      starts[i] = {at = #text + 1, line = p.line}
      -- a paragraph's lines lose their indentation, as CommonMark's do
      text = text .. (i > 1 and p.text:gsub("^%s+", "") or p.text) .. (i < #para and "\n" or "")
    end
    local function line_of(pos)
      local line = first
      for _, s in ipairs(starts) do
        if s.at <= pos then line = s.line end
      end
      return line
    end
    local at = 1
    while true do
      local s, e = text:find("`+", at)
      if not s then break end
      local ticks = e - s + 1
      local close = e + 1
      local cs, ce
      while true do
        cs, ce = text:find("`+", close)
        if not cs or ce - cs + 1 == ticks then break end
        close = ce + 1
      end
      if not cs then
        at = e + 1                              -- an unmatched run is literal text
      else
        local body = text:sub(e + 1, cs - 1):gsub("\n", " ")
        if body:match("^ .* $") and body:match("[^ ]") then body = body:sub(2, -2) end
        spans[#spans + 1] = {text = body, line = line_of(s)}
        at = ce + 1
      end
    end
    para, first = {}, nil
  end
  for _, p in ipairs(prose) do
    if p.text:match("^%s*$") or (para[#para] and para[#para].line ~= p.line - 1) then flush() end
    if not p.text:match("^%s*$") then
      first = first or p.line
      para[#para + 1] = p
    end
  end
  flush()
  return spans
end

-- What a code block says it prints: the text after `marker` (the Lua
-- pattern of a comment's "-->", e.g. "%-%->%s" or "#%s*%-%->%s") on each line.
function M.shown(code, marker)
  local expected = {}
  for line in code:gmatch("[^\n]+") do
    local shown = line:match(marker .. "(.*)$")
    if shown then expected[#expected + 1] = shown end
  end
  return expected
end

-- Nil when every expected line is a line of `out`, in order (tabs read as
-- two spaces); else why not, naming `where`.
function M.missing_shown(expected, out, where)
  local lines = {}
  for line in out:gmatch("[^\n]+") do lines[#lines + 1] = (line:gsub("\t", "  ")) end
  local at = 1
  for _, want in ipairs(expected) do
    while at <= #lines and lines[at] ~= want do at = at + 1 end
    if at > #lines then
      return ("%s says %q but the output was:\n%s"):format(where, want, out)
    end
    at = at + 1
  end
  return nil
end

return M
