-- ---------------------------------------------------------------------------------
-- The nsqlookupd "  V1" engine: framing (the magic, command lines, IDENTIFY's sized body,
-- size-prefixed answers) as hooks of the stream engine's walk(), the state table judged
-- as nsqlookupd judges it, each answer paired with the oldest command awaiting one. It
-- reads the generated tables above (MAGIC, COMMANDS, STATES, REFUSALS, LIMITS, ...) and
-- the fields F; it types no verb, error code or error text of its own.
-- ---------------------------------------------------------------------------------

register_fields(lookupd)

-- a row of the REFUSALS table as a problem: its code and its text, the {placeholders}
-- filled in
local function refusal(row, vars)
  local text = row.text:gsub("{(%w+)}", function(k) return vars and vars[k] or "" end)
  return {code = row.code, text = text}
end

-- does an IDENTIFY body hold every REQUIRED key with a value (a non-empty string, a
-- non-zero number)? A look at the JSON text, not a JSON parser: nsqd writes flat objects.
local function complete(body)
  for _, key in ipairs(REQUIRED) do
    local quoted = '"' .. key .. '"%s*:%s*'
    local text = body:match(quoted .. '"([^"]*)"')
    local number = body:match(quoted .. "(-?[%d%.]+)")
    if not ((text and #text > 0) or (number and tonumber(number) ~= 0)) then return false end
  end
  return true
end

-- ------------------------------------------------------------------------ framing

-- nsqd to nsqlookupd -> length | nil, more | false, code, text
local function measure_command(st, s, off, cap)
  if st.expect_magic then
    if cap - off < #MAGIC then return nil, #MAGIC - (cap - off) end
    if s:sub(off + 1, off + #MAGIC) ~= MAGIC then
      local bad = refusal(REFUSALS.bad_magic)
      return false, bad.code, bad.text
    end
    return #MAGIC
  end
  local nl = s:find("\n", off + 1, true)
  if not nl or nl - off > LIMITS.max_line + 1 then
    if cap - off > LIMITS.max_line then
      return false, "", "command line longer than " .. LIMITS.max_line .. " bytes"
    end
    return nil
  end
  local cmd = COMMANDS[s:sub(off + 1, nl - 1):match("^[^ ]*")]
  if not (cmd and cmd.body) then return nl - off end
  if cap - nl < 4 then return nil, nl + 4 - cap end
  local size = be32(s, nl + 1)
  if size < 0 or size > LIMITS.max_body_size then
    local bad = refusal(REFUSALS.body_size, {size = size})
    return false, bad.code, bad.text
  end
  return nl - off + 4 + size
end

-- the next line after bad bytes
local function resync_command(st, s, pos, cap)
  return s:find("\n", pos + 1, true)
end

-- nsqlookupd to nsqd: [ 4-byte size ][ data ]
local function measure_answer(st, s, off, cap)
  if cap - off < 4 then return nil, 4 - (cap - off) end
  local size = be32(s, off + 1)
  if size < 0 or size > LIMITS.max_body_size then
    return false, "", "response body size (" .. size .. ") is greater than limit ("
           .. LIMITS.max_body_size .. ")"
  end
  return 4 + size
end

-- the next offset whose size fits and whose data starts like an answer (a guess)
local function resync_answer(st, s, pos, cap)
  for p = pos, cap - 6 do
    local size = be32(s, p + 1)
    if size >= 2 and size <= LIMITS.max_body_size then
      local head = s:sub(p + 5, p + 6)
      for _, start in ipairs(ANSWER_STARTS) do
        if head == start then return p end
      end
    end
  end
  return nil
end

-- ------------------------------------------------------------------------ state

-- what nsqlookupd answers to command ``name`` in the connection's state (nil: accepted);
-- decided on the first pass, remembered for the next ones
local function judge(conv, key, live, name)
  if live then
    local rules = conv.state and STATES[conv.state]
    local rule = rules and rules[name]
    local out = false
    if rule and rule.code then
      out = refusal(rule, {verb = name})
    elseif rule then
      conv.state = rule.next
    end
    conv.judged[key] = out
  end
  return conv.judged[key] or nil
end

local function violation(t, problem)
  t:add(F["violation"], problem.code)
  t:add(F["violation.text"], problem.text)
end

-- ------------------------------------------------------------------------ PDUs

local function dissect_command(tvb, s, off, len, tree, pinfo, conv, st, live, summaries)
  local t = tree:add(lookupd, tvb(off, len))
  t:add(F["dir"], st.dir):set_generated()
  local key = pinfo.number .. ":" .. off
  if st.expect_magic then
    st.expect_magic = false
    t:add(F["magic"], tvb(off, len))
    t:append_text(", " .. NAMES.magic)
    judge(conv, key, live, NAMES.magic)
    summaries[#summaries + 1] = NAMES.magic
    return
  end
  local nl = s:find("\n", off + 1, true)
  local line = s:sub(off + 1, nl - 1)
  local verb = line:match("^[^ ]*")
  local cmd = COMMANDS[verb]
  if not cmd then
    local problem = refusal(REFUSALS.unknown_verb, {verb = verb})
    violation(t, problem)
    summaries[#summaries + 1] = "[" .. problem.code .. "]"
    return
  end
  -- the parameters the line holds, in the grammar's order: {field, offset, value}
  local pos, found, problem = off + #verb, {}, nil
  for _, p in ipairs(cmd.params) do
    if s:sub(pos + 1, pos + 1) ~= " " then
      if not p.optional then  -- no command nsqd could have meant: bytes refused
        problem = refusal(REFUSALS.few_params, {verb = verb})
        violation(t, problem)
        summaries[#summaries + 1] = "[" .. problem.code .. "]"
        return
      end
      break
    end
    local value = s:sub(pos + 2, nl - 1):match("^[^ ]*")
    found[#found + 1] = {p.name, pos + 1, value}
    if not problem and not valid_name(value, NAME_SUFFIX, LIMITS.name_max) then
      problem = refusal(REFUSALS[NAME_REFUSALS[p.name]], {verb = verb, name = value})
    end
    pos = pos + 1 + #value
  end
  t:add(F["command"], tvb(off, #verb))
  local words = {verb}
  for _, f in ipairs(found) do
    t:add(F[f[1]], tvb(f[2], #f[3]))
    words[#words + 1] = f[3]
  end
  if cmd.body then
    t:add(F["body_size"], tvb(nl, 4))
    local size = be32(s, nl + 1)
    if size > 0 then t:add(F["body"], tvb(nl + 4, size)) end
    if not complete(s:sub(nl + 5, nl + 4 + size)) then
      problem = refusal(REFUSALS.missing_fields)
    end
  end
  problem = problem or judge(conv, key, live, verb)
  if live then conv.pending[#conv.pending + 1] = {frame = pinfo.number, verb = verb} end
  t:append_text(", " .. table.concat(words, " "))
  local mark = ""
  if problem then
    violation(t, problem)
    mark = " [" .. problem.code .. "]"
  end
  summaries[#summaries + 1] = table.concat(words, " ") .. mark
end

local function dissect_answer(tvb, s, off, len, tree, pinfo, conv, st, live, summaries)
  local t = tree:add(lookupd, tvb(off, len))
  t:add(F["dir"], st.dir):set_generated()
  t:add(F["size"], tvb(off, 4))
  local key = pinfo.number .. ":" .. off
  if live then
    conv.asked[key] = table.remove(conv.pending, 1) or false
  end
  local asked = conv.asked[key]
  local data = s:sub(off + 5, off + len)
  local label
  if data:sub(1, #ERROR_PREFIX) == ERROR_PREFIX then
    local code = data:match("^[^ ]*")
    t:add(F["error.code"], tvb(off + 4, #code))
    if #data > #code + 1 then t:add(F["error.text"], tvb(off + 5 + #code, #data - #code - 1)) end
    if live then conv.state = nil end  -- nsqlookupd closes after an error
    label = NAMES.error .. " " .. data
  else
    if #data > 0 then t:add(F["response"], tvb(off + 4, #data)) end
    label = #data > 40 and data:sub(1, 40) .. "..." or data
  end
  if asked then
    t:add(F["response_to"], asked.frame):set_generated()
    t:add(F["answers"], asked.verb):set_generated()
    label = label .. " (to " .. asked.verb .. ")"
  end
  t:append_text(", " .. label)
  summaries[#summaries + 1] = label
end

-- ------------------------------------------------------------------------ connections

local function new_connection(src_is_client, from_start)
  return {
    c2s = {dir = "c2s", expect_magic = from_start},
    s2c = {dir = "s2c"},
    state = from_start and INITIAL or nil,  -- nil: started mid-connection, not judged
    pending = {},
    asked = {},
    judged = {},
  }
end

local function conversation(tvb, pinfo)
  return conversation_of(tvb, pinfo, 16, magic_side, new_connection)
end

local function undecodable(tree, range, st, how)
  local t = tree:add(lookupd, range)
  if how == "continued" then
    t:set_text("nsqlookupd V1: undecodable bytes (continued)")
    t:add(F["skipped"], range)
  else
    t:set_text("nsqlookupd V1: undecodable bytes")
    t:add(F["dir"], st.dir):set_generated()
  end
  return t
end

local function refused(t, st, summaries, _, code, text)
  -- nsqlookupd refuses another magic and closes: nothing after it is read
  if st.expect_magic then st.dead = true end
  violation(t, {code = code, text = text})
  summaries[#summaries + 1] = "[" .. (code ~= "" and code or "Undecodable") .. "]"
end

local function dead(tree, range, st)
  undecodable(tree, range, st, "continued")
end

local HOOKS = {
  c2s = {measure = measure_command, resync = resync_command, restart = resync_command,
         dissect = dissect_command, undecodable = undecodable, refused = refused, dead = dead},
  s2c = {measure = measure_answer, resync = resync_answer, restart = resync_answer,
         dissect = dissect_answer, undecodable = undecodable, refused = refused},
}

local function info(summaries)
  return table.concat(summaries, ", ")
end

serve(lookupd, {column = "nsqlookupd", conversation = conversation, hooks = HOOKS, info = info})
