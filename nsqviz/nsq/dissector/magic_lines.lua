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

-- Is s a magic of the family (two spaces, "V", a digit: NSQ's "  V2", nsqlookupd's
-- "  V1")? Then it is a client's first bytes, whichever protocol's it is. (The bytes
-- alone say it, in every pass: TCP's fields are not there in a first pass without a
-- tree, as the GUI and tshark -2 run it.)
local function a_magic(s)
  return s:find("^  V%d") ~= nil
end

-- Is the sender of s, a connection's first payload (in tvb, pinfo), its client? Yes if
-- it sent the magic (or its start: the connection is seen from its first byte) or
-- talks to a server port, no if a server port talks; nil when neither tells. Then:
-- whether s is the client's first bytes -- the magic, or on a server port another
-- magic of the family (one the server refuses, as nsqd refuses nsqlookupd's).
-- (The side hook of the stream engine's conversation_of.)
local function magic_side(tvb, pinfo, s)
  if MAGIC:sub(1, math.min(#s, #MAGIC)) == s:sub(1, #MAGIC) then return true, true end
  if is_server_port(pinfo.dst_port) then return true, a_magic(s) end
  if is_server_port(pinfo.src_port) then return false, false end
  return nil, false
end
