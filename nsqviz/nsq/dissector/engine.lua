-- ---------------------------------------------------------------------------------
-- The NSQ engine: framing, dissection, per-connection state. It reads the generated
-- tables above (COMMANDS, FRAME_TYPES, MESSAGE, LIMITS, NAMES, FEATURES, ERRORS ...) and
-- the fields F; it names no command, frame, parameter, layout, feature or error itself.
--
-- Per connection it decides once which side is the client (the magic, a server port,
-- or -- for a capture that started mid-connection -- the first bytes), gives the
-- stream engine's walk() its framing hooks for each direction (walk follows the
-- stream), pairs nsqd's responses with the commands that asked for them, and marks
-- what follows an IDENTIFY response that negotiated snappy, deflate or TLS as such
-- instead of dissecting it as NSQ.
-- ---------------------------------------------------------------------------------

local ef_violation = ProtoExpert.new("nsq.expert.violation", "NSQ protocol violation",
                                     expert.group.PROTOCOL, expert.severity.ERROR)
local ef_nonfatal = ProtoExpert.new("nsq.expert.nonfatal", "NSQ protocol violation (not fatal)",
                                    expert.group.PROTOCOL, expert.severity.WARN)
local ef_skipped = ProtoExpert.new("nsq.expert.resync", "Bytes skipped while resynchronising",
                                   expert.group.SEQUENCE, expert.severity.WARN)
local ef_cut = ProtoExpert.new("nsq.expert.cut", "PDU cut short by the capture's snaplen",
                               expert.group.MALFORMED, expert.severity.WARN)
local ef_switch = ProtoExpert.new("nsq.expert.switch", "The stream changes form here",
                                  expert.group.SEQUENCE, expert.severity.NOTE)
nsq.experts = {ef_violation, ef_nonfatal, ef_skipped, ef_cut, ef_switch}

register_fields(nsq)

nsq.prefs.ports = Pref.range("Server ports", table.concat(SERVER_PORTS, ","),
                             "TCP ports of nsqd (connections opening with the magic are found anywhere)",
                             65535)

local json_dissector = Dissector.get("json")

-- Wireshark's JSON dissector under ``tree``; JSON it finds malformed is marked by it,
-- and does not stop the PDUs after it
local function show_json(range, pinfo, tree)
  if not pcall(Dissector.call, json_dissector, range:tvb(), pinfo, tree) then
    tree:add(range, "JSON: malformed (JSON dissector)")
  end
end

-- ------------------------------------------------------------------------ helpers

local function u64(digits)
  local v = UInt64.new(0)
  for i = 1, #digits do v = v * 10 + (digits:byte(i) - 48) end
  return v
end

-- an error text from the generated ERRORS table, its placeholders filled in
local function fill(answer, vars)
  return (answer.text:gsub("{(%w+)}", function(k) return vars and vars[k] or "{" .. k .. "}" end))
end

-- Go's %q (strconv.Quote, as nsqd quotes names): C escapes, \xNN for other control
-- bytes; bytes from 0x80 on are kept (printable UTF-8 is, in Go)
local function quoted(s)
  local named = {['"'] = '\\"', ["\\"] = "\\\\", ["\a"] = "\\a", ["\b"] = "\\b",
                 ["\f"] = "\\f", ["\n"] = "\\n", ["\r"] = "\\r", ["\t"] = "\\t",
                 ["\v"] = "\\v"}
  return '"' .. s:gsub('[%c"\\]', function(c)
    return named[c] or string.format("\\x%02x", c:byte())
  end) .. '"'
end

-- Python's repr() of bytes (as the grammar's messages show them)
local function pyrepr(s)
  local q = (s:find("'", 1, true) and not s:find('"', 1, true)) and '"' or "'"
  return "b" .. q .. s:gsub("[%c\\'\"\128-\255]", function(c)
    if c == "\\" then return "\\\\" end
    if c == q then return "\\" .. c end
    if c == "'" or c == '"' then return c end
    local named = {["\n"] = "\\n", ["\t"] = "\\t", ["\r"] = "\\r"}
    return named[c] or string.format("\\x%02x", c:byte())
  end) .. q
end

local function printable(s, limit)
  local t = s:sub(1, limit):gsub("[^%g ]", ".")
  if #s > limit then t = t .. "..." end
  return t
end

-- ------------------------------------------------------------------------ framing
-- measure(...) -> length | nil (need more) | false, answer, vars (cannot be framed)

local function measure_command(st, s, off, cap)
  local avail = cap - off
  if st.expect_magic then
    local n = math.min(avail, #MAGIC)
    if s:sub(off + 1, off + n) ~= MAGIC:sub(1, n) then return false, ERRORS.framing.magic end
    if n < #MAGIC then return nil end
    return #MAGIC
  end
  local limit = math.min(cap, off + LIMITS.max_line + 1)
  local nl = s:find("\n", off + 1, true)
  if not nl or nl > limit then
    if avail > LIMITS.max_line then return false, ERRORS.framing.line end
    return nil
  end
  local line = s:sub(off + 1, nl - 1)
  if line:sub(-1) == "\r" then line = line:sub(1, -2) end  -- nsqd trims a \r before \n
  local sp = line:find(" ", 1, true)
  local verb = (sp and line:sub(1, sp - 1) or line):gsub("\r$", "")
  local line_len = nl - off
  local spec = COMMANDS[verb]
  if not spec or not spec.body then return line_len end
  local _, spaces = line:gsub(" ", "")
  if spaces < #spec.params then return line_len end
  if cap - nl < 4 then return nil end
  local size = be32(s, nl + 1)
  local vars = {verb = verb, n = tostring(size)}
  if spec.message then
    if size <= 0 then return false, ERRORS.framing.message_size, vars end
    if size > LIMITS.max_msg_size then return false, ERRORS.framing.message_big, vars end
  else
    if size <= 0 then return false, ERRORS.framing.body_size, vars end
    if size > LIMITS.max_body_size then return false, ERRORS.framing.body_big, vars end
  end
  return line_len + 4 + size
end

local function measure_frame(st, s, off, cap)
  local avail = cap - off
  if avail < 4 then return nil end
  local size = be32(s, off + 1)
  if size < 4 then return false, ERRORS.frames.size_small, {n = tostring(size)} end
  if size > LIMITS.max_frame_size then return false, ERRORS.frames.size_big, {n = tostring(size)} end
  if avail < FRAME_HEADER_SIZE then return nil end
  local ftype = be32(s, off + 5)
  if not FRAME_TYPES[ftype] then return false, ERRORS.frames.frame_type, {n = tostring(ftype)} end
  return 4 + size
end

-- where framing can start again after undecodable bytes (nil: not in these bytes)
local function resync_command(st, s, pos, cap)
  if st.expect_magic then return cap end  -- without the magic this is not protocol V2
  while true do
    local nl = s:find("\n", pos + 1, true)
    if not nl or nl >= cap then return nil end
    local c = s:sub(nl + 1, nl + 1)
    if VERB_STARTS:find(c, 1, true) then return nl end
    pos = nl
  end
end

local function resync_frame(st, s, pos, cap)
  for p = pos, cap - FRAME_HEADER_SIZE do
    local size, ftype = be32(s, p + 1), be32(s, p + 5)
    if size >= 4 and size <= LIMITS.max_frame_size and FRAME_TYPES[ftype] then return p end
  end
  return nil
end

-- ------------------------------------------------------------------------ PDUs

-- one "NSQ" subtree per PDU, saying which way it went
local function pdu_tree(tree, range, st)
  local t = tree:add(nsq, range)
  t:add(F["dir"], st.dir):set_generated()
  return t
end

-- nsqd answers in command order: a response answers the oldest waiting command it
-- answers on success, an error the oldest that gets this very error (one nsqd answers
-- anyway, one whose refusal is known, a FIN/REQ/TOUCH whose "not in flight" text it
-- is). Waiting commands, oldest first, as a queue; the oldest are forgotten past
-- WAITING_KEPT (as nsqviz's observer does).
local WAITING_KEPT = 4096

local function wait_answer(conv, pinfo, off, verb, answered, expect, flight)
  local w = conv.waiting
  w.last = w.last + 1
  w[w.last] = {verb = verb, frame = pinfo.number, key = pinfo.number .. ":" .. off,
               answered = answered, expect = expect, flight = flight}
  if w.last - w.first >= WAITING_KEPT then
    w[w.first] = nil
    w.first = w.first + 1
  end
end

-- the waiting command a response (error_data nil) or an error answers; it and every
-- command before it are then done
local function answered_by(conv, error_data)
  local w = conv.waiting
  for i = w.first, w.last do
    local c = w[i]
    local fits
    if error_data == nil then
      fits = c.answered and not c.expect
    elseif c.expect then
      fits = c.expect == error_data
    else
      fits = c.answered or c.flight == error_data
    end
    if fits then
      for j = w.first, i do w[j] = nil end
      w.first = i + 1
      return c
    end
  end
  return nil
end

-- the command the answer at off answers, shown as response_to: recorded on the first
-- pass (find: the answer may answer one; error_data as for answered_by), read back after
local function answer_to(t, conv, pinfo, off, find, error_data)
  local key = pinfo.number .. ":" .. off
  local asked = conv.answers[key]
  if find then
    asked = answered_by(conv, error_data)
    if asked then
      conv.answers[key] = asked
      conv.answered_in[asked.key] = pinfo.number
    end
  end
  if asked then t:add(F["response_to"], asked.frame):set_generated() end
  return asked
end

local function violation(item, st, answer, vars, summaries)
  local text = fill(answer, vars)
  local code = answer.code
  if st.resyncing then
    item:add(F["skipped.reason"], text)
    item:add_proto_expert_info(ef_skipped, text)
  else
    item:add(F["violation"], code)
    item:add(F["violation.text"], text)
    item:add(F["violation.fatal"], answer.fatal)
    item:add_proto_expert_info(answer.fatal and ef_violation or ef_nonfatal,
                               (code ~= "" and code .. ": " or "") .. text)
  end
  summaries[#summaries + 1] = "[" .. (code ~= "" and code or "undecodable") .. "]"
  return text
end

-- The parameters of a command line, checked in the codec's order; a failure returns
-- the generated answer for that situation and the values for its placeholders.
local function command_params(t, tvb, s, off, line, verb, spec, summaries)
  local E = ERRORS.commands[verb]
  local params, starts = {}, {}
  local pos = #verb + 2
  while pos <= #line + 1 and line:sub(pos - 1, pos - 1) == " " do
    local sp = line:find(" ", pos, true) or (#line + 1)
    params[#params + 1] = line:sub(pos, sp - 1)
    starts[#starts + 1] = pos - 1
    pos = sp + 1
  end
  if #params < #spec.params then
    local missing = spec.params[#params + 1]
    if #params + 1 ~= #spec.params or missing.default == nil then return false, E.few end
    -- nsqd reads the missing parameter as its default (RDY: 1): the command stands
    t:add(F[missing.key], tvb(off, #line), u64(tostring(missing.default))):set_generated()
    return false, E.few, nil, true
  end
  -- as the codec: a bad name or id keeps the command (its fields are shown) with the
  -- first violation attached; a number that is not one ends it there
  local first, fvars = nil, nil
  local shown = {verb}
  for i, p in ipairs(spec.params) do
    local value, range = params[i], tvb(off + starts[i], #params[i])
    if #value == 0 then range = tvb(off + starts[i] - 1, 1) end
    if p.kind == "name" then
      t:add(F[p.key], range, value)
      if not valid_name(value, NAME_SUFFIX, LIMITS.name_max) and not first then
        first, fvars = E["param." .. p.name], {quoted = quoted(value)}
      end
    elseif p.kind == "decimal" then
      if not value:find("^%d+$") then
        if first then return false, first, fvars end
        return false, E["param." .. p.name], {value = value}
      end
      t:add(F[p.key], range, u64(value))
    elseif p.kind == "message_id" then
      t:add(F[p.key], range, value)
      if not first and #value ~= 16 then
        first, fvars = E.id_length, {value = value}
      elseif not first and not value:find("^%x+$") then
        first, fvars = E.id_hex, {value = value}
      end
    end
    shown[#shown + 1] = value
  end
  summaries[#summaries + 1] = table.concat(shown, " ")
  if #shown > 1 then t:append_text(" " .. table.concat(shown, " ", 2)) end
  if first then return false, first, fvars, true end
  if #params > #spec.params then return false, E.many, nil, true end  -- nsqd ignores them
  return true
end

local function command_body(t, tvb, s, bstart, size, verb, spec, pinfo)
  local E = ERRORS.commands[verb]
  t:add(F["body_size"], tvb(bstart, 4))
  local data = bstart + 4
  if spec.body == "bytes" then
    t:add(F["body"], tvb(data, size))
  elseif spec.body == "json" then
    -- nsqd wants a JSON object; the check here is its outline, the JSON dissector
    -- shows the members
    local text = s:sub(data + 1, data + size)
    if not (text:find("^%s*{") and text:find("}%s*$")) then return false, E.json end
    local b = t:add(F["body"], tvb(data, size))
    show_json(tvb(data, size), pinfo, b)
  elseif spec.body == "messages" then
    if size < 4 then return false, E.count_cut end
    local count = be32(s, data + 1)
    t:add(F["mpub.count"], tvb(data, 4))
    if count < 1 then return false, E.count, {n = tostring(count)} end
    local pos, stop = data + 4, data + size
    for i = 1, count do
      if stop - pos < 4 then return false, E.size_cut end
      local n = be32(s, pos + 1)
      local m = t:add(tvb(pos, math.min(4 + math.max(n, 0), stop - pos)), "Message " .. i)
      m:add(F["mpub.size"], tvb(pos, 4))
      if n < 1 then return false, E.size, {n = tostring(n)} end
      if stop - pos - 4 < n then return false, E.cut end
      m:add(F["mpub.body"], tvb(pos + 4, n))
      pos = pos + 4 + n
    end
    if pos < stop then return false, E.trailing, {n = tostring(stop - pos)} end
  end
  return true
end

local function dissect_command(tvb, s, off, len, tree, pinfo, conv, st, live, summaries)
  local t = pdu_tree(tree, tvb(off, len), st)
  if st.expect_magic then
    st.expect_magic = false
    t:add(F["magic"], tvb(off, len))
    t:append_text(", Magic")
    summaries[#summaries + 1] = NAMES.magic
    return
  end
  local nl = s:find("\n", off + 1, true)
  local line = s:sub(off + 1, nl - 1)
  if line:sub(-1) == "\r" then line = line:sub(1, -2) end  -- nsqd trims a \r before \n
  local sp = line:find(" ", 1, true)
  local verb = sp and line:sub(1, sp - 1) or line
  t:add(F["command"], tvb(off, math.max(#verb, 1)), verb)
  t:append_text(", " .. verb)
  local spec = COMMANDS[verb]
  local ok, answer, vars, kept = true, nil, nil, nil
  if not spec then
    ok, answer, vars = false, ERRORS.unknown, {value = verb}
  else
    ok, answer, vars, kept = command_params(t, tvb, s, off, line, verb, spec, summaries)
    if (ok or kept) and spec.body then
      local bok, banswer, bvars = command_body(t, tvb, s, nl, len - (nl - off) - 4, verb, spec,
                                               pinfo)
      if not bok then
        -- the body is bad too: nsqd answers the line's refusal first, unless it ignored it
        if ok or answer.code == "" then ok, answer, vars = false, banswer, bvars end
        kept = false
        summaries[#summaries + 1] = verb
      end
    end
    if kept then t:add(F["violation.kept"], true):set_generated() end
  end
  if not ok then
    local resyncing = st.resyncing
    local text = violation(t, st, answer, vars, summaries)
    if live and not resyncing and (answer.code ~= "" or (spec and kept)) then
      local expect = nil
      if answer.code ~= "" then expect = text ~= "" and answer.code .. " " .. text or answer.code end
      wait_answer(conv, pinfo, off, verb, spec ~= nil and spec.answered, expect)
    end
    return
  end
  if st.resyncing then st.resyncing = false end
  local answer = conv.answered_in[pinfo.number .. ":" .. off]
  if answer then t:add(F["response_in"], answer):set_generated() end
  if live then
    -- a FIN/REQ/TOUCH gets nsqd's "not in flight" error when its id is not in flight
    local not_flying, flight = ERRORS.commands[verb].id_hex, nil
    if not_flying then flight = fill(not_flying, {value = line:match("^%S+ (%S+)")}) end
    wait_answer(conv, pinfo, off, verb, spec.answered, nil,
                flight and not_flying.code .. " " .. flight)
  end
end

-- features an IDENTIFY response switches on, read from nsqd's JSON
local function negotiated(text)
  local function on(key) return text:find('"' .. key .. '"%s*:%s*true') ~= nil end
  if on(FEATURES.tls) then return "tls" end
  if on(FEATURES.snappy) then return "snappy" end
  if on(FEATURES.deflate) then
    local level = text:match('"' .. FEATURES.level .. '"%s*:%s*(%d+)')
    return "deflate", tonumber(level) or FEATURES.default_level
  end
  return nil
end

local function dissect_frame(tvb, s, off, len, tree, pinfo, conv, st, live, summaries)
  local t = pdu_tree(tree, tvb(off, len), st)
  local pos = off
  for _, f in ipairs(FRAME_HEADER) do
    t:add(F[f.name], tvb(pos, f.size))
    pos = pos + f.size
  end
  local ftype = be32(s, off + 5)
  local name = FRAME_TYPES[ftype]
  t:append_text(", " .. name)
  local dlen = len - FRAME_HEADER_SIZE
  local data = s:sub(pos + 1, pos + dlen)
  if name == NAMES.message then
    if dlen < MESSAGE_FIXED then
      violation(t, st, ERRORS.frames.short, nil, summaries)
      return
    end
    local shown = {}
    for _, f in ipairs(MESSAGE) do
      local size = f.size > 0 and f.size or (off + len - pos)
      local item = t:add(F["msg." .. f.name], tvb(pos, size))
      if f.type == "int64" then  -- nanoseconds since the epoch: also as a time
        local ns = tvb(pos, size):int64()
        local secs = ns / 1000000000
        local time = NSTime.new(secs:tonumber(), (ns - secs * 1000000000):tonumber())
        t:add(F["msg.time"], tvb(pos, size), time):set_generated()
      elseif f.type == "bytes" then
        shown[#shown + 1] = "(" .. size .. " bytes)"
      end
      if f.type == "hexid" then
        local id = s:sub(pos + 1, pos + size)
        shown[#shown + 1] = "id=" .. id
        if not id:find("^%x+$") then
          violation(t, st, ERRORS.frames.id, {pyrepr = pyrepr(id)}, summaries)
          return
        end
      elseif f.type == "uint16" then
        shown[#shown + 1] = f.name .. "=" .. tvb(pos, size):uint()
      end
      pos = pos + size
    end
    summaries[#summaries + 1] = name .. " " .. table.concat(shown, " ")
    t:append_text(" " .. table.concat(shown, " "))
  elseif name == NAMES.error then
    local sp = data:find(" ", 1, true)
    local code = sp and data:sub(1, sp - 1) or data
    t:add(F["error.code"], tvb(pos, math.max(#code, 1)), code)
    if sp then t:add(F["error.text"], tvb(pos + sp, dlen - sp)) end
    summaries[#summaries + 1] = name .. " " .. code
    t:append_text(" " .. code)
    answer_to(t, conv, pinfo, off, live, data)
  else
    local r = t:add(F["response"], tvb(pos, math.max(dlen, 0)))
    if dlen > 0 then t:add(F["response.text"], tvb(pos, dlen)) end
    summaries[#summaries + 1] = name .. " " .. printable(data, 40)
    t:append_text(" " .. printable(data, 40))
    if data:sub(1, 1) == "{" then show_json(tvb(pos, dlen), pinfo, r) end
    local asked = answer_to(t, conv, pinfo, off, live and data ~= HEARTBEAT, nil)
    if live and asked and asked.verb == NEGOTIATES then
      local mode, level = negotiated(data)
      if mode then
        conv.c2s.mode = mode
        st.mode = mode
        conv.switch[pinfo.number .. ":" .. off] = {mode = mode, level = level}
      end
    end
    local switch = conv.switch[pinfo.number .. ":" .. off]
    if switch then
      local item = t:add(F["switch"], switch.mode):set_generated()
      if switch.level then t:add(F["switch.level"], switch.level):set_generated() end
      item:add_proto_expert_info(ef_switch, NEGOTIATES .. " negotiated " .. switch.mode
                                 .. ": both directions switch to it after this frame")
    end
  end
  if st.resyncing then st.resyncing = false end
end

-- ------------------------------------------------------------------------ connections

-- Which side is the client, decided once per TCP connection on its first payload:
-- the magic (or its start), a server port, else the look of the first bytes when the
-- capture started after the handshake.
local function client_side(tvb, pinfo, s)
  local is_client, from_start = magic_side(tvb, pinfo, s)
  if is_client ~= nil then return is_client, from_start end
  local word = s:match("^([A-Z]+)[ \n]")
  if word and COMMANDS[word] then return true, from_start end
  if tvb:len() >= FRAME_HEADER_SIZE
     and measure_frame({}, tvb:raw(0, FRAME_HEADER_SIZE), 0, FRAME_HEADER_SIZE) then
    return false, from_start
  end
  return nil
end

local function new_connection(src_is_client, from_start)
  return {
    c2s = {dir = "c2s", expect_magic = from_start, resyncing = not from_start, skip = 0},
    s2c = {dir = "s2c", expect_magic = false, resyncing = not from_start, skip = 0},
    waiting = {first = 1, last = 0},
    answers = {},
    answered_in = {},
    switch = {},
  }
end

-- The connection of this packet, or nil: not NSQ
local function conversation(tvb, pinfo)
  return conversation_of(tvb, pinfo, 16, client_side, new_connection)
end

local function mark_rest(tree, tvb, off, cap, st, summaries)
  local t = pdu_tree(tree, tvb(off, cap - off), st)
  if st.mode == "tls" then
    t:append_text(", TLS")
    t:add(F["tls"], tvb(off, cap - off))
    summaries[#summaries + 1] = "[TLS]"
  else
    t:append_text(", " .. st.mode .. "-compressed")
    t:add(F["compressed"], tvb(off, cap - off), st.mode)
    t:add(F["compressed.data"], tvb(off, cap - off))
    summaries[#summaries + 1] = "[" .. st.mode .. "-compressed]"
  end
end

local function continue_here(st, s, off, cap)
  -- a segment after one that ended a line may start a command
  if off == 0 and st.dir == "c2s" and st.last_nl and VERB_STARTS:find(s:sub(1, 1), 1, true) then
    return 0
  end
  return (st.dir == "c2s" and resync_command or resync_frame)(st, s, off, cap)
end

local function undecodable(tree, range, st, how)
  local t = pdu_tree(tree, range, st)
  if how == "continued" then
    t:append_text(", undecodable (continued)")
    t:add(F["skipped"], range)
  else
    t:append_text(", undecodable")
  end
  return t
end

-- bytes nsqd cannot frame: it answers them with the error (the magic, a bad size ...),
-- which then answers them
local function refused(t, st, summaries, at, answer, vars)
  local resyncing = st.resyncing
  local text = violation(t, st, answer, vars, summaries)
  if at.live and not resyncing and answer.code ~= "" then
    wait_answer(at.conv, at.pinfo, at.off, nil, false,
                text ~= "" and answer.code .. " " .. text or answer.code)
  end
  if st.expect_magic then st.dead = true end
end

local function opaque(tree, tvb, off, cap, st, summaries)
  if not st.mode then return false end
  if off < cap then mark_rest(tree, tvb, off, cap, st, summaries) end
  return true
end

local function stalled(st, s, cap)
  st.last_nl = s:sub(cap, cap) == "\n"
end

-- The head of a command the snaplen cut (s: its captured bytes, from off): its line,
-- body size and the captured start of its body, as nsqviz's cut units; the verb, or nil
-- when too little was captured to name it
local function cut_command(t, tvb, s, off, pinfo, conv, live)
  local nl = s:find("\n", 1, true)
  if not nl then return nil end
  local line = s:sub(1, nl - 1)
  if line:sub(-1) == "\r" then line = line:sub(1, -2) end
  local words = {}
  for w in (line .. " "):gmatch("([^ ]*) ") do words[#words + 1] = w end
  local verb = words[1]
  local spec = COMMANDS[verb]
  if not spec or not spec.body then return nil end  -- a line-only command is whole
  t:add(F["command"], tvb(off, #verb), verb)
  local pos = #verb + 1
  for i, p in ipairs(spec.params) do
    local value = words[i + 1]
    if not value then break end
    local range = tvb(off + pos, math.max(#value, 1))
    if p.kind == "decimal" and value:find("^%d+$") then
      t:add(F[p.key], range, u64(value))
    else
      t:add(F[p.key], range, value)
    end
    pos = pos + #value + 1
  end
  if #s >= nl + 4 then
    t:add(F["body_size"], tvb(off + nl, 4))
    t:add(F["body"], tvb(off + nl + 4, #s - nl - 4))
    if spec.body == "messages" and #s >= nl + 8 then t:add(F["mpub.count"], tvb(off + nl + 4, 4)) end
  end
  if live then wait_answer(conv, pinfo, off, verb, spec.answered, nil) end
  return verb
end

-- The head of a frame the snaplen cut: its size and type, the message header fields
-- wholly captured (and the captured start of the id), the captured start of its data;
-- a response or error answers a command as a whole one does. The frame type's name,
-- or nil
local function cut_frame(t, tvb, s, off, pinfo, conv, live)
  if #s < FRAME_HEADER_SIZE then return nil end
  local pos = off
  for _, f in ipairs(FRAME_HEADER) do
    t:add(F[f.name], tvb(pos, f.size))
    pos = pos + f.size
  end
  local name = FRAME_TYPES[be32(s, 5)]
  local stop = off + #s
  if name == NAMES.message then
    for _, f in ipairs(MESSAGE) do
      if f.size == 0 then
        t:add(F["msg." .. f.name], tvb(pos, stop - pos))
        break
      end
      if stop - pos < f.size then
        if f.type == "hexid" and stop > pos then t:add(F["msg." .. f.name], tvb(pos, stop - pos)) end
        break
      end
      t:add(F["msg." .. f.name], tvb(pos, f.size))
      pos = pos + f.size
    end
    return name
  end
  local data = s:sub(FRAME_HEADER_SIZE + 1)
  t:add(F["response"], tvb(pos, stop - pos))
  answer_to(t, conv, pinfo, off, live and data ~= HEARTBEAT,
            name == NAMES.error and data or nil)
  return name
end

-- A PDU cut short by the snaplen (its length len, when its size prefix was captured):
-- decoded as far as it was captured, the rest marked cut
local function cut_short(tree, tvb, off, cap, len, pinfo, conv, st, live, summaries)
  local range = tvb(off, cap - off)
  local t = pdu_tree(tree, range, st)
  local head = st.dir == "c2s" and cut_command or cut_frame
  local name = head(t, tvb, tvb:raw(off, cap - off), off, pinfo, conv, live)
  t:add(F["cut"], range)
  t:add(F["cut.captured"], cap - off):set_generated()
  if len then t:add(F["cut.length"], len):set_generated() end
  t:add_proto_expert_info(ef_cut)
  summaries[#summaries + 1] = (name and name .. " " or "") .. "[cut by snaplen]"
end

local function not_v2(tree, range, st)
  pdu_tree(tree, range, st):append_text(", not protocol V2")
end

local HOOKS = {}
for dir, h in pairs({
  c2s = {measure = measure_command, resync = resync_command, dissect = dissect_command},
  s2c = {measure = measure_frame, resync = resync_frame, dissect = dissect_frame},
}) do
  h.restart, h.undecodable, h.refused, h.opaque = continue_here, undecodable, refused, opaque
  h.stalled, h.cut, h.pdu, h.dead = stalled, cut_short, pdu_tree, not_v2
  HOOKS[dir] = h
end

-- the Info column: up to 6 PDUs one by one, more counted by their first word
local function info(summaries)
  if #summaries <= 6 then return table.concat(summaries, ", ") end
  local counts, order = {}, {}
  for _, x in ipairs(summaries) do
    local head = x:match("^(%S+)")
    if not counts[head] then counts[head] = 0; order[#order + 1] = head end
    counts[head] = counts[head] + 1
  end
  local parts = {}
  for _, h in ipairs(order) do parts[#parts + 1] = h .. " \195\151" .. counts[h] end
  return #summaries .. " PDUs: " .. table.concat(parts, ", ")
end

serve(nsq, {column = "NSQ", conversation = conversation, hooks = HOOKS, info = info})
