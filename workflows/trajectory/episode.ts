/** What an episode's play updates as it goes: its environment session, its tally and its page in the Web UI. */
import type { Conversation } from './conversation';
import type { EpisodeSession } from './session';
import type { EpisodeTally } from './tally';

export interface Episode {
  session: EpisodeSession;
  tally: EpisodeTally;
  conversation: Conversation;
}
