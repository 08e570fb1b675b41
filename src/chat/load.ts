/** The chat format of the configured model: a real model's own (`model.path`), else the embedded one. */
import type { ModelSettings } from '../../config/schema';
import { embeddedChatFormat, type ChatFormat } from './format';
import { loadChatFormat } from './hfChatFormat';

export async function chatFormatFor(model: ModelSettings): Promise<ChatFormat> {
  return model.path === undefined ? embeddedChatFormat : loadChatFormat(model.path);
}
