-- ---------------------------------------------------------------------------------
-- What NSQ's two line protocols (V2 to nsqd, V1 to nsqlookupd) share, both opened by a
-- 4-byte MAGIC: which side is the client, nsqd's naming rule for topics and channels.
-- The generators put it into those two dissectors (NSQ's, and the lookup protocol's,
-- which follows nsqd's naming rule).
-- ---------------------------------------------------------------------------------

-- is name a valid topic or channel name? 1 to max_len bytes of [.a-zA-Z0-9_-], the
-- optional suffix (#ephemeral) not on its own
local function valid_name(name, suffix, max_len)
  local base = name
  if #suffix > 0 and name:sub(-#suffix) == suffix then
    base = name:sub(1, -#suffix - 1)
  end
  return #name >= 1 and #name <= max_len and #base >= 1
         and base:find("^[%.a-zA-Z0-9_%-]+$") ~= nil
end

-- Is the sender of s, a connection's first payload (in tvb, pinfo), its client? Yes if
-- it sent the magic (or its start: the connection is seen from its first byte) or
-- talks to a server port, no if a server port talks; nil when neither tells. Then:
-- whether s is the magic. (The side hook of the stream engine's conversation_of.)
local function magic_side(tvb, pinfo, s)
  local from_start = MAGIC:sub(1, math.min(#s, #MAGIC)) == s:sub(1, #MAGIC)
  if from_start or is_server_port(pinfo.dst_port) then return true, from_start end
  if is_server_port(pinfo.src_port) then return false, from_start end
  return nil, from_start
end
